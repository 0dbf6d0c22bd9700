"""The daemon's run book: which runs are open, what each still owes, and when one is done.

A run opens with its ``run.start`` (or its first message), counts the MS2 spectra it
received and answered, and is done once its ``run.end`` came and every spectrum it
received is answered; then its table is finalized and its results file written
(elsewhere: `rtsearch.serve.daemon`). A spectrum of a run whose ``run.end`` came but
which is still being answered opens a new segment of that name (a later results
file, ``.part2``); the ended one drains meanwhile. Everything here is under one
lock, the book's; a run's `LiveRun` has its own (`RunState.lock`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from rtsearch.search.live import LiveRun
from rtsearch.serve.jobs import RunState

log = logging.getLogger(__name__)


class RunBook:
    """Open runs by name, the ended ones still draining, results files written per name."""

    def __init__(self, new_run: Callable[[str], LiveRun]) -> None:
        self.new_run = new_run
        self._lock = threading.Lock()
        self._open: dict[str, RunState] = {}
        self._draining: list[RunState] = []  # ended, still being answered, while a same-named run is open
        self._parts: dict[str, int] = {}  # results files written per run name (a reopened run gets .partN)

    def __len__(self) -> int:
        """Runs open or draining."""
        with self._lock:
            return len(self._open) + len(self._draining)

    def state(self, run: str, *, announced: bool = False) -> RunState:
        """The open run ``run``; a new one if none is open or the last one got its ``run.end``."""
        with self._lock:
            return self._state(run, announced)

    def _state(self, run: str, announced: bool) -> RunState:
        state = self._open.get(run)
        if state is not None and state.ending:
            # run.end came and its spectra are still being answered: what arrives now is a new segment
            log.info("run %r: reopened after its run.end", run)
            self._draining.append(state)
            state = None
            announced = True
        if state is None:
            if not announced:
                log.info("run %r: first message without run.start, opening it", run)
            state = self._open[run] = RunState(self.new_run(run))
        return state

    def start(self, run: str) -> None:
        """``run.start``: open ``run`` (an open run of that name goes on)."""
        with self._lock:
            if run in self._open and not self._open[run].ending:
                log.warning("run.start for run %r, which is already open: continuing it", run)
            else:
                self._state(run, True)

    def end(self, run: str, expected: int | None) -> RunState | None:
        """``run.end``: the run is complete once answered; returns it when it is done already."""
        with self._lock:
            current = self._open.get(run)
            if current is not None and current.ending:
                log.warning("run %r: a second run.end, ignored", run)
                return None
            state = self._state(run, False)
            state.ending, state.expected = True, expected
            return state if self._done(state) else None

    def received(self, counts: Iterable[tuple[RunState, int, int]]) -> None:
        """``(run, MS2 spectra, MS1 spectra)`` received: they owe as many answers (call before queueing them)."""
        with self._lock:
            for state, ms2, ms1 in counts:
                state.outstanding += ms2
                state.ms1 += ms1

    def answered(self, counts: Iterable[tuple[RunState, int]]) -> list[RunState]:
        """``(run, answers)`` published; the runs this completed."""
        with self._lock:
            done = []
            for state, n in counts:
                state.outstanding -= n
                if self._done(state):
                    done.append(state)
            return done

    def ending_all(self) -> list[RunState]:
        """Shutting down: every run ends here; those already answered in full."""
        with self._lock:
            states = [*self._open.values(), *self._draining]
            for state in states:
                state.ending = True
            return [s for s in states if self._done(s)]

    def finish(self, state: RunState) -> int | None:
        """Close a done run for finishing; its results file's part number (``None``: not done, or taken)."""
        with self._lock:
            if not self._done(state) or state.finishing:
                return None
            state.finishing = True
            name = state.name
            if self._open.get(name) is state:
                del self._open[name]
            elif state in self._draining:
                self._draining.remove(state)
            part = self._parts[name] = self._parts.get(name, 0) + 1
            return part

    def has(self, run: str) -> bool:
        """Whether a run (segment) of this name is open or draining."""
        with self._lock:
            return run in self._open or any(s.name == run for s in self._draining)

    @staticmethod
    def _done(state: RunState) -> bool:
        return state.ending and state.outstanding <= 0 and not state.finishing
