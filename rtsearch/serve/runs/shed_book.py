"""Spectra answered ``shed`` at the door, booked in their runs without the event loop waiting on a run's lock.

An intake process answers ``shed`` itself what the daemon's queue would make late
(`rtsearch.serve.intake.intake_process`)
and reports those spectra to the daemon, whose event loop books them in their runs (journal, results file, counts)
under each run's lock; once a report is booked — journaled — its intake process is told (``booked``) and publishes
its answers. The results thread holds that lock while it builds a batch's answers (running q-values and all: a few ms
under load), so a loop that waited for it stopped taking in spectra exactly while the daemon was behind (the lanes'
event loops spent a fifth of their samples in that booking at 100,000 /s, docs/history/RESULTS.md 2026-11-29). The
loop now books a report only when the run's lock is free, else tries again `RETRY_S` later on the loop; reports are
booked in the order they came, and a run counts them answered only once booked (so it cannot end before). At shutdown
`book` with ``wait`` books what is left.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.serve.runs.runs import RunBook, RunState
from rtsearch.types import ResultStatus

RETRY_S = 0.0005  # a report whose run's lock was held: tried again this much later (the loop runs meanwhile)


@dataclass
class _Report:
    state: RunState
    scans: Any  # int64 [n]
    precursor_mz: Any  # float64 [n]
    ids: list[str]
    reason: str
    booked: Callable[[], None] | None  # called once booked (journaled)


class ShedBook:
    """Door-shed spectra waiting to be booked in their runs (see the module docstring)."""

    def __init__(self, runs: RunBook, finish: Callable[[RunState], None]) -> None:
        """``finish``: called with each run the booking completed (every spectrum it received answered)."""
        self.runs, self.finish = runs, finish
        self._queue: collections.deque[_Report] = collections.deque()
        self._retry: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        """Reports not booked yet."""
        return len(self._queue)

    def add(self, state: RunState, scans: np.ndarray, precursor_mz: np.ndarray, ids: list[str], reason: str,
            booked: Callable[[], None] | None = None) -> None:  # fmt: skip
        """One run's spectra of a report: booked now if nothing waits before them and the run's lock is free;
        ``booked`` is called once they are (reports are booked in order)."""
        self._queue.append(_Report(state, scans, precursor_mz, ids, reason, booked))
        self.book()

    def book(self, *, wait: bool = False) -> None:
        """Book the waiting reports in order, up to the first whose run's lock is held (with ``wait``: all, waiting
        for each lock)."""
        queue = self._queue
        while queue:
            r = queue[0]
            if not r.state.lock.acquire(blocking=wait):
                self._again_later()
                return
            try:
                r.state.live.book_unscored(ResultStatus.SHED, r.scans, r.precursor_mz, [r.reason] * len(r.scans),
                                           r.ids)  # fmt: skip
            finally:
                r.state.lock.release()
            queue.popleft()
            if r.booked is not None:
                r.booked()
            for state in self.runs.answered([(r.state, len(r.scans))]):
                self.finish(state)

    def _again_later(self) -> None:
        if self._retry is None:
            self._retry = asyncio.get_running_loop().call_later(RETRY_S, self._again)

    def _again(self) -> None:
        self._retry = None
        self.book()
