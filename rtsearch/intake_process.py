"""The intake process: reads the spectra socket, decodes every message, hands chunks to the daemon.

Started by `rtsearch.ingest.Intake` (its docstring says why intake has a process of
its own). It speaks to the daemon over one PAIR socket (``ipc://`` in a private
folder), each message a pickled tuple:

- child → daemon: ``("ready", endpoint)`` or ``("error", reason)`` once at start;
  then ``("items", [SpectraChunk | Received, ...])`` for what it read, in arrival
  order; ``("closed",)`` after its last read.
- daemon → child: ``b"stop"``: stop reading, send what was read, say ``closed``, exit.

It ignores SIGINT and SIGTERM (a terminal's Ctrl-C or a service manager reaches the
whole process group; the daemon decides when intake closes) and exits by itself when
the daemon's process is gone.
"""

from __future__ import annotations

import os
import pickle
import signal
import time

import zmq

from rtsearch.ingest import CHUNK_MAX, FLUSH_S, ChunkBuilder, Items, Received
from rtsearch.wire import SpectrumMessage, decode

PARENT_CHECK_MS = 500


def _send(chan: zmq.Socket[bytes], obj: object) -> None:
    chan.send(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def read_available(sock: zmq.Socket[bytes], builder: ChunkBuilder) -> Items:
    """Everything already queued on ``sock``, up to `CHUNK_MAX` messages or `FLUSH_S` seconds."""
    recv, wall, mono = sock.recv_multipart, time.time_ns, time.monotonic_ns
    items: Items = []
    flush_at = 0
    for k in range(CHUNK_MAX):
        try:
            frames = recv(zmq.NOBLOCK)
        except zmq.Again:
            break
        w, m = wall(), mono()
        if k == 0:
            flush_at = m + int(FLUSH_S * 1e9)
        msg = decode(frames)
        if type(msg) is SpectrumMessage:
            builder.add(msg, w, m)
        else:
            if len(builder):
                items.append(builder.build())
            items.append(Received(msg, w, m))
        if m >= flush_at:
            break
    if len(builder):
        items.append(builder.build())
    return items


def serve(channel: str, endpoint: str, mode: str, hwm: int) -> None:
    """The process's main function (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = os.getppid()
    ctx = zmq.Context()
    chan = ctx.socket(zmq.PAIR)
    chan.setsockopt(zmq.SNDHWM, 0)
    chan.setsockopt(zmq.LINGER, 5000)  # what was read reaches the daemon, unless it is gone
    chan.connect(channel)
    sock = ctx.socket(zmq.SUB if mode == "sub" else zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, hwm)  # 0: unbounded in ZeroMQ; the daemon's batcher bounds memory
    sock.setsockopt(zmq.LINGER, 0)
    try:
        if mode == "sub":
            # everything: a message on an unknown topic is counted as invalid, not filtered unseen
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.connect(endpoint)
            bound = endpoint
        else:
            sock.bind(endpoint)
            bound = sock.getsockopt_string(zmq.LAST_ENDPOINT)
    except zmq.ZMQError as e:
        _send(chan, ("error", str(e)))
        sock.close(0)
        chan.close()
        ctx.term()
        return
    _send(chan, ("ready", bound))
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(chan, zmq.POLLIN)
    builder = ChunkBuilder()
    try:
        while True:
            events = dict(poller.poll(PARENT_CHECK_MS))
            if chan in events and chan.recv() == b"stop":
                break
            if sock in events:
                items = read_available(sock, builder)
                if items:
                    _send(chan, ("items", items))
            elif not events and os.getppid() != parent:
                return  # the daemon is gone
        _send(chan, ("closed",))
    finally:
        sock.close(0)
        chan.close()
        ctx.term()
