"""A router process of the lanes' front: each message on to the lane daemon that owns its run.

Behind the front's door (`rtsearch.serve.door`: ZeroMQ's C proxy spreading the spectra socket over the routers),
each router reads whole messages, takes the run from the header (frame 1, JSON; every topic of wire v1 and its
batched topics names one run), and pushes the frames, untouched, to that run's lane (`rtsearch.serve.lanes`).
A run's lane is asked once of the front's registry (a REQ/REP pair: every router gets the same answer) and kept.
A message whose run cannot be read goes to lane 0, which answers or counts it as malformed as a lone daemon
would. Nothing is decoded beyond the run's name, and the frames go on as ZeroMQ's own (no copy): 6-12 µs a
message of four frames on the development machine (`bench/router_cost.py`), so a router carries tens of
thousands a second. On the GPU machine four routers used ~1.8 cores at 100,000 messages a second
(bench/RESULTS.md): the hop is worth removing (the intake processes could route the chunks they decode) where
cores are short.

Stopping: the front writes to the control pipe (or closes it); the router then forwards what reaches it until
`QUIET_S` pass without a message, and closes its lane sockets lingering until they delivered everything.
"""

from __future__ import annotations

import contextlib
import signal
from multiprocessing.connection import Connection
from typing import Any

import orjson
import zmq

from rtsearch.serve.runtime import name_os_thread

QUIET_S = 0.2  # after the stop, a router ends once nothing came for this long
LINGER_MS = 10_000  # how long a stopping router waits for its lanes to take what it pushed
BURST = 256  # messages a router forwards before it looks at its control pipe again
_NOBLOCK, _SNDMORE = int(zmq.NOBLOCK), int(zmq.SNDMORE)


def run_of(header: bytes) -> str | None:
    """The ``run`` of a wire header (``None``: not a JSON object naming one as a string)."""
    try:
        head = orjson.loads(header)
    except orjson.JSONDecodeError:
        return None
    run = head.get("run") if isinstance(head, dict) else None
    return run if isinstance(run, str) else None


class LaneOf:
    """Run name → lane, asked of the registry once a run (`Registry` in `rtsearch.serve.lanes`)."""

    def __init__(self, req: zmq.Socket[Any]) -> None:
        self._req = req
        self._known: dict[str, int] = {}

    def __call__(self, frames: list[zmq.Frame] | list[bytes]) -> int:
        header = frames[1] if len(frames) > 1 else None
        run = None if header is None else run_of(header.bytes if isinstance(header, zmq.Frame) else header)
        if run is None:
            return 0
        lane = self._known.get(run)
        if lane is None:
            self._req.send_string(run)
            lane = self._known[run] = int(self._req.recv())
        return lane


def route(inner: str, lanes: list[str], registry: str, control: Connection, index: int) -> None:
    """The router process's main: ``inner`` (the door's), the ``lanes``' spectra endpoints, the ``registry``'s;
    says ``ready`` on ``control``, then forwards until told to stop there (see the module docstring)."""
    name_os_thread(f"router_{index}")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the front stops its routers in order, after the door
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctx: zmq.Context[Any] = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.RCVHWM, 0)
    pull.connect(inner)
    outs = []
    for endpoint in lanes:
        out = ctx.socket(zmq.PUSH)
        out.setsockopt(zmq.SNDHWM, 0)  # never drop: the lanes' batchers bound memory and answer overload
        out.connect(endpoint)
        outs.append(out)
    req = ctx.socket(zmq.REQ)
    req.connect(registry)
    lane_of = LaneOf(req)
    recv, sends = pull.recv, [out.send for out in outs]
    poller = zmq.Poller()
    poller.register(pull, zmq.POLLIN)
    poller.register(control.fileno(), zmq.POLLIN)
    control.send("ready")
    stopping = False
    try:
        while True:
            events = dict(poller.poll(int(QUIET_S * 1000) if stopping else None))
            if not events and stopping:
                break
            if control.fileno() in events and not stopping:
                with contextlib.suppress(EOFError, OSError):
                    control.recv()
                stopping = True
                poller.unregister(control.fileno())
            for _ in range(BURST):
                # frames kept as ZeroMQ's (copy=False) and sent on as they are: 6-12 µs a message against 14-17
                # with recv_multipart and send_multipart (development machine, 4 frames, 150 peaks)
                try:
                    frame = recv(_NOBLOCK, copy=False)
                except zmq.Again:
                    break
                frames = [frame]
                while frame.more:
                    frame = recv(_NOBLOCK, copy=False)
                    frames.append(frame)
                send = sends[lane_of(frames)]
                for frame in frames[:-1]:
                    send(frame, _SNDMORE, copy=False)
                send(frames[-1], copy=False)
    finally:
        pull.close(0)
        req.close(0)
        for out in outs:
            out.close(LINGER_MS)
        ctx.term()
