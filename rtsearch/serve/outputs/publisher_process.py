"""A publisher process: the daemon's answers, column by column in, one JSON result message each out.

The daemon hands each publisher process batches of `rtsearch.matches.Results` with their
stamps over a Unix socket pair (`rtsearch.serve.intake.chunks` framing, one pickle a batch: arrays,
not objects per answer); the process builds each `ResultMessage`, stamps ``published_ns``,
encodes it (orjson; those the sender asked to get in batches all in one ``batch.results``
message) and pushes it to the daemon's results proxy, which forwards it to the
results PUB. The pickle comes only from the daemon that started this process, over the socket pair it made
(`rtsearch.serve.children.child.socket_pair`: no address anyone else can reach). So the ~5 µs of Python an
answer costs to build, encode and send runs here, off the daemon's GIL. A ``STOP`` (or the daemon's end) ends it
after what it was given is sent.
"""

from __future__ import annotations

import itertools
import pickle
import socket
import time

import numpy as np
import orjson
import zmq

from rtsearch.matches import ResultMessage, Results
from rtsearch.protocol.batch import encode_batch_results
from rtsearch.protocol.wire import RESULT, VERSION
from rtsearch.serve.children.child import ready
from rtsearch.serve.children.framing import Unpacker
from rtsearch.serve.intake.chunks import MESSAGE

STOP_KIND = 9  # the daemon's last message to a publisher process
_OPTS = orjson.OPT_SERIALIZE_NUMPY


def stamp(msg: ResultMessage, sent: int, received: int, published: int) -> ResultMessage:
    """``msg`` with the protocol version and its three stamps (wall ns; a negative ``sent`` is unknown: null)."""
    msg["v"], msg["sent_ns"], msg["received_ns"], msg["published_ns"] = VERSION, (sent if sent >= 0 else None), \
        received, published  # fmt: skip
    return msg


def send_results(
    push: zmq.Socket[bytes], results: Results, sent: np.ndarray, received: np.ndarray, batched: np.ndarray,
    psms: list[tuple[str, bytes]] | None = None,
) -> None:  # fmt: skip
    """Each answer of ``results`` as one result message, or, where ``batched`` (the sender asked for answers in
    batches, `rtsearch.protocol.batch`), all of those in one ``batch.results`` message; ``sent``/``received``: the
    stamps, wall ns (a negative ``sent`` is unknown); ``published_ns`` stamped as each is encoded. The identified
    answers' bodies also go into ``psms`` when given (for MQTT). The publishers', the daemon's and the intake
    processes' one way of answering."""
    send, more, last, wall, dumps = push.send, zmq.SNDMORE, 0, time.time_ns, orjson.dumps
    together: list[ResultMessage] = []
    flags = batched.tolist() if batched.any() else itertools.repeat(False)
    for msg, s, r, b in zip(results.messages(), sent.tolist(), received.tolist(), flags, strict=False):
        stamp(msg, s, r, wall())
        if b:
            together.append(msg)
            continue
        body = dumps(msg, option=_OPTS)
        send(RESULT, more)
        send(body, last)
        if psms is not None and msg["status"] == "identified":
            psms.append((results.run, body))
    if together:
        now = wall()  # the batch's answers leave together
        for m in together:
            m["published_ns"] = now
        push.send_multipart(encode_batch_results(results.run, together))
        if psms is not None:
            psms.extend((results.run, dumps(m, option=_OPTS)) for m in together if m["status"] == "identified")


def serve(conn: socket.socket, endpoint: str) -> None:
    """The process's main function: read batches from ``conn``, push their messages to ``endpoint``."""
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.SNDHWM, 0)  # the proxy's PULL takes everything: never drop, never block long
    push.connect(endpoint)
    ready(conn)
    unpacker = Unpacker()
    try:
        while data := conn.recv(unpacker.wanted(4 << 20)):
            for kind, parts in unpacker.feed(data):
                if kind == STOP_KIND:
                    return
                if kind == MESSAGE:
                    for results, sent, received, batched in pickle.loads(parts[0]):
                        send_results(push, results, sent, received, batched)
    finally:
        push.close(linger=-1)  # everything handed over before the process ends
        ctx.term()
