"""The daemon's run book: which runs are open, what each still owes, and when one is done.

A run opens with its ``run.start`` (or its first message), counts the MS2 spectra it
received and answered, and is done once its ``run.end`` came and every spectrum it
received is answered; then its table is finalized and its results file written
(elsewhere: `rtsearch.serve.daemon`). A spectrum of a run whose ``run.end`` came but
which is still being answered opens a new segment of that name (a later results
file, `rtsearch.io.results.claim_results_path`); the ended one drains meanwhile. Clients cannot grow
the book without bound: beyond ``max_open`` open runs the one idle longest is ended to make room, and
a run that received nothing for ``idle_s`` is ended (`idle`). Everything here is under one lock, the
book's; a run's `LiveRun` has its own (`RunState.lock`).

Several intake processes (`rtsearch.serve.intake.door`) may hand over a ``run.end`` before the run's last
spectra. So a ``run.end`` that announces ``n_spectra`` ends the run once that many spectrum messages
arrived (spectra arriving meanwhile still belong to it), or `END_WAIT_S` after the last one when some
never come; one without ``n_spectra`` ends it ``settle_s`` after its last message (0 with one intake,
where order is kept). `settled` hands out the runs that time completed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import numpy as np

from rtsearch.search.live import LiveRun
from rtsearch.serve.engine.jobs import RunState

log = logging.getLogger(__name__)

END_WAIT_S = 2.0  # a run.end announced more spectra than came: the run ends this long after the last one


class RunBook:
    """Open runs by name, the ended ones still draining, results files written per name."""

    def __init__(
        self, new_run: Callable[[str], LiveRun], *, max_open: int = 1000, idle_s: float = 86_400.0,
        settle_s: float = 0.0, clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:  # fmt: skip
        self.new_run = new_run
        self.settle_ns = int(settle_s * 1e9)
        self.wait_ns = int(END_WAIT_S * 1e9)
        self.max_open = max_open
        self.idle_ns = int(idle_s * 1e9)
        self.clock = clock
        self._ended: list[RunState] = []  # runs the book ended itself (room, idleness), for `take_ended`
        self._lock = threading.Lock()
        self._open: dict[str, RunState] = {}
        self._draining: list[RunState] = []  # ended, still being answered, while a same-named run is open

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
        if state is not None and state.ending and self._complete(state):
            # run.end came and its spectra are still being answered: what arrives now is a new segment
            log.info("run %r: reopened after its run.end", run)
            self._draining.append(state)
            state = None
            announced = True
        if state is None:
            if not announced:
                log.info("run %r: first message without run.start, opening it", run)
            if len(self._open) >= self.max_open:
                self._make_room()
            state = self._open[run] = RunState(self.new_run(run), last_ns=self.clock())
        return state

    def _make_room(self) -> None:
        """End the open run idle longest (its spectra are still answered, then it is finished)."""
        live = [s for s in self._open.values() if not s.ending]
        if not live:
            return
        oldest = min(live, key=lambda s: s.last_ns)
        log.warning("%d runs open (max_open_runs): ending run %r, idle for %.0f s, to open another", len(self._open),
                    oldest.name, (self.clock() - oldest.last_ns) / 1e9)  # fmt: skip
        self._end(oldest)

    def _end(self, state: RunState) -> None:
        """End ``state`` without its run.end: it moves to the draining ones, to be finished once answered."""
        state.ending = True
        if self._open.get(state.name) is state:
            del self._open[state.name]
            self._draining.append(state)
        self._ended.append(state)

    def idle(self) -> None:
        """End every open run that received nothing for ``idle_s`` (`take_ended` hands them out)."""
        with self._lock:
            now = self.clock()
            for state in [s for s in self._open.values() if not s.ending and now - s.last_ns > self.idle_ns]:
                log.info("run %r: nothing received for %.0f s, ending it", state.name, (now - state.last_ns) / 1e9)
                self._end(state)

    def take_ended(self) -> list[RunState]:
        """The runs the book ended itself since the last call (finish them once done)."""
        with self._lock:
            out, self._ended = self._ended, []
            return out

    def start(self, run: str) -> None:
        """``run.start``: open ``run`` (an open run of that name goes on)."""
        with self._lock:
            if run in self._open and not self._open[run].ending:
                # several intakes: a run's first spectra may overtake its run.start (nothing wrong)
                log.log(logging.DEBUG if self.settle_ns else logging.WARNING,
                        "run.start for run %r, which is already open: continuing it", run)
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
            state.ending, state.expected, state.ended_ns = True, expected, self.clock()
            return state if self._done(state) else None

    def settled(self) -> list[RunState]:
        """Ended runs that time completed (see the module docstring): finish them."""
        with self._lock:
            return [s for s in [*self._open.values(), *self._draining] if self._done(s)]

    def received(self, counts: Iterable[tuple[RunState, int, int]]) -> None:
        """``(run, MS2 spectra, MS1 spectra)`` received: they owe as many answers (call before queueing them)."""
        with self._lock:
            now = self.clock()
            for state, ms2, ms1 in counts:
                state.outstanding += ms2
                state.ms1 += ms1
                state.received += ms2 + ms1
                state.last_ns = now

    def malformed(self, state: RunState) -> None:
        """A malformed message naming ``state``'s run and a scan came: it owes an ``invalid`` answer, but it is not one
        of the spectra a ``run.end``'s ``n_spectra`` counts (those the sender's reader took for spectra; counting it
        ended a run before its last valid spectra came, which then reopened it)."""
        with self._lock:
            state.outstanding += 1
            state.last_ns = self.clock()

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
                state.expected = None  # nothing more comes: what arrived is the run
                state.ended_ns = state.last_ns = min(state.last_ns, self.clock() - self.settle_ns)
            return [s for s in states if self._done(s)]

    def finish(self, state: RunState) -> bool:
        """Close a done run for finishing; whether the caller is the one to finish it."""
        with self._lock:
            if not self._done(state) or state.finishing:
                return False
            state.finishing = True
            name = state.name
            if self._open.get(name) is state:
                del self._open[name]
            elif state in self._draining:
                self._draining.remove(state)
            return True

    def has(self, run: str) -> bool:
        """Whether a run (segment) of this name is open or draining."""
        with self._lock:
            return run in self._open or any(s.name == run for s in self._draining)

    def _complete(self, state: RunState) -> bool:
        """Whether an ended run received all it will (see the module docstring)."""
        if state.expected is None:
            return self.settle_ns == 0 or self.clock() - max(state.last_ns, state.ended_ns) >= self.settle_ns
        if state.received >= state.expected:
            return True
        return self.clock() - max(state.last_ns, state.ended_ns) >= self.wait_ns

    def _done(self, state: RunState) -> bool:
        return state.ending and state.outstanding <= 0 and not state.finishing and self._complete(state)


def note_scans(state: RunState, scan_column: np.ndarray) -> None:
    """Remember the MS2 scans a run received; those it received already (or twice here) are answered again
    (each message gets its answer), counted, and said once a run."""
    scans = scan_column.tolist()
    if state.scans.isdisjoint(scans) and len(set(scans)) == len(scans):
        state.scans.update(scans)
        return
    seen, repeated = set(state.scans), []
    for scan in scans:
        if scan in seen:
            repeated.append(scan)
        seen.add(scan)
    if repeated and state.duplicates == 0:
        log.warning("run %r: scan %d received a second time (answered again; the run's end says how many did)",
                    state.name, repeated[0])  # fmt: skip
    state.duplicates += len(repeated)
    state.scans.update(scans)
