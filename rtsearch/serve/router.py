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

import collections
import contextlib
import signal
import threading
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


MAX_RUNS_KNOWN = 100_000  # run names the registry and each router remember (a client inventing names gains nothing)
END = b"run.end"


class Registry:
    """Run → lane for every router: a REP socket answered by a thread (`run_lane`). A new run goes to the lane with
    the fewest open runs (a run's ``run.end``, told by the router that passed it on, closes it), of those the one
    given the fewest runs (runs one after another take turns); a run keeps its lane while remembered (the last
    `MAX_RUNS_KNOWN` names)."""

    def __init__(self, ctx: zmq.Context[Any], endpoint: str, lanes: int) -> None:
        self._rep = ctx.socket(zmq.REP)
        self._rep.bind(endpoint)
        self.endpoint = endpoint
        self.runs = [0] * lanes  # runs given to each lane (`rtsearch_lane_runs_total`)
        self.open = [0] * lanes  # of them, not ended
        self._lane_of: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._ended: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="registry", daemon=True)
        self._thread.start()

    def run_lane(self, run: str) -> int:
        """``run``'s lane, given now if it has none (see the class docstring)."""
        lane = self._lane_of.get(run)
        if lane is None:
            lane = self._lane_of[run] = min(range(len(self.open)), key=lambda k: (self.open[k], self.runs[k]))
            self.runs[lane] += 1
            self.open[lane] += 1
            if len(self._lane_of) > MAX_RUNS_KNOWN:
                old, old_lane = self._lane_of.popitem(last=False)
                if old not in self._ended:
                    self.open[old_lane] -= 1
                self._ended.discard(old)
        return lane

    def ended(self, run: str) -> None:
        """``run``'s ``run.end`` passed: it no longer counts as open on its lane."""
        lane = self._lane_of.get(run)
        if lane is not None and run not in self._ended:
            self._ended.add(run)
            self.open[lane] -= 1

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self._rep.poll(100):
                continue
            kind, run = self._rep.recv_multipart()
            if kind == b"end":
                self.ended(run.decode())
                self._rep.send(b"")
            else:
                self._rep.send_string(str(self.run_lane(run.decode())))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._rep.close(0)


class LaneOf:
    """Run name → lane, asked of the `Registry` once a run (and told of its ``run.end``)."""

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
            if len(self._known) >= MAX_RUNS_KNOWN:
                self._known.clear()
            lane = self._known[run] = int(self._ask(b"lane", run))
        topic = frames[0].bytes if isinstance(frames[0], zmq.Frame) else frames[0]
        if topic == END:
            self._ask(b"end", run)
        return lane

    def _ask(self, kind: bytes, run: str) -> bytes:
        self._req.send_multipart([kind, run.encode()])
        return bytes(self._req.recv())


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
