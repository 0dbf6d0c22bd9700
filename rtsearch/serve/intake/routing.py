"""Which lane a run goes to (`rtsearch.serve.lanes`): the front's registry, and the intake processes' side of it.

Behind the lanes' front the intake processes read and decode every message (as behind a lone daemon's door) and
build each lane's chunks of the messages of its runs (`rtsearch.serve.intake.reader.Reader.read_lanes`; a message naming
no run goes to lane 0). A run's lane is decided once by the front's `Registry` (a REP socket answered by a thread)
and kept, so every intake process sends a run's messages to the same lane; each intake process asks through a
`LaneOf` (a REQ socket), once a run, and tells the registry of each ``run.end`` it passes on, so that new runs go
to the lanes with the fewest open runs.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

import zmq

MAX_RUNS_KNOWN = 100_000  # run names the registry and each intake process remember (invented names gain nothing)


class Registry:
    """Run → lane for every intake process: a REP socket answered by a thread (`run_lane`). A new run goes to the
    lane with the fewest open runs (a run's ``run.end`` closes it), of those the one given the fewest runs (runs one
    after another take turns); a run keeps its lane while remembered (the last `MAX_RUNS_KNOWN` names)."""

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
            parts = self._rep.recv_multipart()
            reply = b""
            if len(parts) == 2:  # (a `LaneOf`'s: always; a run's name as it encodes it)
                kind, run = parts[0], parts[1].decode("utf-8", "surrogatepass")
                if kind == b"end":
                    self.ended(run)
                else:
                    reply = str(self.run_lane(run)).encode()
            self._rep.send(reply)  # a REP answers every request, or it answers none after it

    def alive(self) -> bool:
        """Whether its thread still answers (it ends only at `close`)."""
        return self._thread.is_alive()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._rep.close(0)


class LaneOf:
    """Run name → lane, asked of the `Registry` once a run (``end``: told of its ``run.end``)."""

    def __init__(self, req: zmq.Socket[Any]) -> None:
        self._req = req
        self._known: dict[str, int] = {}

    def __call__(self, run: str) -> int:
        lane = self._known.get(run)
        if lane is None:
            if len(self._known) >= MAX_RUNS_KNOWN:
                self._known.clear()
            lane = self._known[run] = int(self._ask(b"lane", run))
        return lane

    def end(self, run: str) -> None:
        self._ask(b"end", run)

    def _ask(self, kind: bytes, run: str) -> bytes:
        self._req.send_multipart([kind, run.encode("utf-8", "surrogatepass")])
        return bytes(self._req.recv())
