"""Runs' ends in the daemon: every run journaled as it goes, finished once done, recovered after a stop.

`RunEnds` opens each run's `LiveRun` with its journal (`rtsearch.serve.runs.journal`). At start, `open` checks the
results folder (writable, room left), takes its lock (`rtsearch.serve.runs.folder_lock`: one folder, one daemon) and
lists the journals an earlier daemon left (SIGKILL, a power cut). A run the run book says is done, and each of
those journals, is queued to be finished: its final discriminant, q-values and results file, its journal deleted,
its summary handed on (MQTT, the demo). One finisher on the event loop hands what is queued to the refit process
in tasks of many runs (`rtsearch.serve.runs.refits.finish_runs`; live runs before recovered ones; a task a run was the
limit when thousands of small runs ended a minute), or, for a target that cannot be reopened there, finishes them
in a thread. So the daemon is ready at once, however many journals were left, and finishes them meanwhile.

A run that never got an MS2 spectrum writes no file. One whose file cannot be written (a full disk, the folder's
permissions) is counted (``rtsearch_results_write_failures_total``, alerted), kept in its journal and tried again,
every `WRITE_RETRY_S` doubling up to `WRITE_RETRY_MAX_S` — at a stop, the next start finishes it. One that cannot
be finished for any other reason (its FDR fails) is written without q-values where it can be, its journal moved
aside with the reason (`rtsearch.serve.runs.journal.set_aside`), counted (``rtsearch_run_finish_failures_total``), and
serving goes on: no run keeps a daemon from serving the others, or from starting again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtsearch.config import ServeConfig
from rtsearch.errors import InputError
from rtsearch.io.results import check_writable, claim_results_path
from rtsearch.matches import concat_batches
from rtsearch.search.live import LiveRun, RunSummary
from rtsearch.search.target import SearchTarget
from rtsearch.serve.children.runtime import give_back_heap
from rtsearch.serve.engine.jobs import RunState
from rtsearch.serve.observe.stats import ResultsWrite, RunFinishFailed, Runs
from rtsearch.serve.runs.folder_lock import FolderLock
from rtsearch.serve.runs.journal import FOLDER, Journals, RunJournal, leftover_runs, set_aside
from rtsearch.serve.runs.refits import FINISH_ROWS, FinishOutcome, Refitter, RunToFinish, finish_runs
from rtsearch.serve.runs.runs import RunBook

log = logging.getLogger(__name__)

LIVE_Q_REFRESH = 0.01  # running q-values read off a curve at most 1 % of the run old (`RunningFdr`)
WRITE_RETRY_S, WRITE_RETRY_MAX_S = 1.0, 60.0  # a results file not written is tried again after these
FINISH_RUNS = 256  # runs finished in one task at most (and `rtsearch.serve.runs.refits.FINISH_ROWS` PSMs)
MIN_FREE_BYTES = 64 << 20  # a results folder with less room than this at start is called full
# what finished runs held handed back to the system once no run is open, at most this often: their cyclic garbage
# waits for the workers' seldom oldest-generation pass and glibc keeps what is freed, and rounds of a fuzzed stream
# left the daemon 8-14 % above the first round's memory; with this 2-6 % (docs/history/RESULTS.md, 2026-12-06). The pass
# holds the GIL some tens of ms: only when nothing is open
TRIM_EVERY_S = 10.0
TRIM_AFTER_S = 1.0  # ... this long after, if nothing was opened meanwhile (the runs' last references dropped)


@dataclass
class Finished:
    """A finalized run: its summary and results file."""

    summary: RunSummary
    path: Path
    expected: int | None = None


@dataclass(eq=False)
class _Ending:
    """A run queued to be finished: a live run (``state``) or a journal left by an earlier daemon (``journal``)."""

    name: str
    path: Path  # its results file, claimed
    state: RunState | None = None
    journal: Path | None = None
    pause: float = WRITE_RETRY_S  # before the next try, once its file could not be written


class RunEnds:
    """Runs' journals and ends (see the module docstring); ``runs`` is the daemon's run book."""

    def __init__(
        self, target: SearchTarget, cfg: ServeConfig, *, refitter: Refitter, record: Callable[..., None],
        on_finished: Callable[[Finished], None], recover_journals: bool = True, lock: bool = True,
    ) -> None:  # fmt: skip
        """``recover_journals``: finish the journals an earlier daemon left (lanes but 0: not theirs); ``lock``: take
        the results folder's lock (a lane: its front holds it)."""
        self.recover_journals = recover_journals
        self.target = target
        self.cfg = cfg
        self.refitter = refitter
        self.record = record
        self.on_finished = on_finished
        self.runs: RunBook | None = None
        self.finished: list[Finished] = []
        self.journals: Journals | None = None
        self._lock = FolderLock(Path(cfg.results_dir) / FOLDER) if lock else None
        self._journal_of: dict[LiveRun, RunJournal] = {}
        self._claimed: set[Path] = set()  # results files this daemon has claimed (`claim_results_path`)
        self._live: collections.deque[_Ending] = collections.deque()  # done runs waiting to be finished
        self._left: collections.deque[_Ending] = collections.deque()  # an earlier daemon's journals, after them
        self._wake: asyncio.Event | None = None
        self._busy = 0  # live runs queued, being finished or waiting to be tried again
        self._finisher: asyncio.Task[None] | None = None
        self.provenance: dict[str, Any] | None = None  # beside each results file (`rtsearch.io.provenance`)
        self._trimmed = 0.0  # when the heap was last handed back (monotonic s)

    async def open(self) -> None:
        """Check the results folder and take it, queue an earlier daemon's journals there, start journaling."""
        cfg = self.cfg
        check_results_folder(cfg.results_dir)
        if self._lock is not None:
            self._lock.acquire()
        left = leftover_runs(cfg.results_dir, self.target) if self.recover_journals else []
        self.journals = Journals(cfg.results_dir, self.target, record=self.record)
        self._wake = asyncio.Event()
        for run, path in left:
            self._left.append(_Ending(run, claim_results_path(cfg.results_dir, run, cfg.results_format,
                                                              self._claimed), journal=path))  # fmt: skip
        if self._left:
            log.warning("%d runs left in journals by an earlier daemon (stopped before their run.end): finishing "
                        "them while serving", len(self._left))  # fmt: skip
        self._finisher = asyncio.create_task(self._finish_queued(), name="run ends")
        self._wake.set()

    def close(self) -> None:
        """Stop journaling (runs not finished keep their journal, for the next start)."""
        if self._finisher is not None:
            self._finisher.cancel()
        if self.journals is not None:
            self.journals.shutdown()

    def release(self) -> None:
        """Let the results folder go (last: nothing of this daemon's writes there any more)."""
        if self._lock is not None:
            self._lock.release()

    def new_run(self, name: str) -> LiveRun:
        """A run's `LiveRun`, its every batch journaled before its results are published."""
        assert self.journals is not None, "open() first"
        journal = self.journals.open(name)
        live = LiveRun(name, self.target, refits="deferred", q_refresh=LIVE_Q_REFRESH,
                       sink=functools.partial(self.journals.append, journal), identified_at=self.cfg.identified_at)
        self._journal_of[live] = journal
        return live

    def maybe_finish(self, state: RunState) -> None:
        """Queue ``state`` to be finished if it is done and nobody finishes it yet (the event loop)."""
        assert self.runs is not None and self._wake is not None
        if not self.runs.finish(state):
            return
        self.record(Runs(len(self.runs)))
        live = state.live
        if state.expected is not None and state.expected != state.received:
            log.warning("run %r: run.end announced %d spectra, received %d MS2 + %d MS1", live.name,
                        state.expected, state.received - state.ms1, state.ms1)  # fmt: skip
        if state.duplicates:
            log.warning("run %r: %d spectra repeated a scan number of the run", live.name, state.duplicates)
        if not live.answered:  # a run.end for a run that never sent an MS2 spectrum (or for one finished already)
            log.info("run %r ended with no MS2 spectrum (%d MS1): no results file", live.name, state.ms1)
            self._closed(state)
            return
        cfg = self.cfg
        path = claim_results_path(cfg.results_dir, live.name, cfg.results_format, self._claimed)
        self._live.append(_Ending(live.name, path, state=state))
        self._busy += 1
        self._wake.set()

    def failure(self) -> str | None:
        """Why the finisher or the journals' fsync thread stopped, if one did (a bug: the daemon must not go on with
        runs never finished or answers never synced)."""
        if self.journals is not None and (why := self.journals.failure()):
            return why
        task = self._finisher
        if task is None or not task.done() or task.cancelled():
            return None
        error = task.exception()
        return f"the run finisher stopped: {type(error).__name__}: {error}" if error else "the run finisher stopped"

    async def wait(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the live runs queued or being finished are (an earlier daemon's
        journals not finished yet stay, for the next start)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while self._busy:
                    await asyncio.sleep(0.05)

    # ---------------------------------------------------------------- the finisher (the event loop)

    async def _finish_queued(self) -> None:
        """Hand the queued runs on, a task at a time (live runs first), until cancelled."""
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._live or self._left:
                endings: list[_Ending] = []
                rows = 0
                for queue in (self._live, self._left):
                    while queue and len(endings) < FINISH_RUNS and rows < FINISH_ROWS:
                        endings.append(e := queue.popleft())
                        rows += len(e.state.live.table) if e.state is not None else 0
                outcomes = await self._finish(endings)
                for ending, outcome in zip(endings, outcomes, strict=True):
                    self._finished(ending, outcome)

    async def _finish(self, endings: list[_Ending]) -> list[FinishOutcome]:
        """Their outcomes: in the refit process when the target can be reopened there, else in a thread."""
        runs = await asyncio.to_thread(self._to_finish, endings)
        reopen = self.target.reopen()
        if reopen is not None:
            try:
                return await asyncio.wrap_future(self.refitter.finish(reopen, runs, self.provenance))
            except Exception as e:  # the pool is gone (shutdown, a crash) or the child died: do it here
                log.warning("finishing %d runs in the refit process failed (%s: %s); finishing here", len(runs),
                            type(e).__name__, e)  # fmt: skip
        return await asyncio.to_thread(finish_runs, self.target, runs, self.provenance)

    @staticmethod
    def _to_finish(endings: list[_Ending]) -> list[RunToFinish]:
        """What the refit process needs of each (a thread: a long run's batches are joined here)."""
        out = []
        for e in endings:
            if e.state is None:
                out.append(RunToFinish(e.name, e.path, journal=e.journal))
                continue
            live = e.state.live
            batch = concat_batches(live.table.batches)
            out.append(RunToFinish(e.name, e.path, batch=batch, by_status=dict(live.by_status)))
        return out

    def _finished(self, ending: _Ending, outcome: FinishOutcome) -> None:
        """One run's outcome: done, tried again later (its file could not be written), or set aside."""
        if outcome.disk:
            self.record(ResultsWrite())
            log.error("run %r: results file not written (%s); kept in its journal, trying again in %.0f s",
                      ending.name, outcome.error, ending.pause)  # fmt: skip
            asyncio.get_running_loop().call_later(ending.pause, self._again, ending)
            ending.pause = min(2 * ending.pause, WRITE_RETRY_MAX_S)
            return
        if ending.state is not None:
            self._busy -= 1
        if outcome.error:
            self.record(RunFinishFailed())
            self._set_aside(ending, outcome)
        elif ending.state is not None:
            self._closed(ending.state)
        if outcome.summary is None or outcome.path is None or outcome.error:
            return
        summary = outcome.summary
        if ending.journal is not None:
            cut = f"; {outcome.cut} bytes of a cut-short record lost" if outcome.cut else ""
            log.warning("run %r recovered from its journal (the daemon stopped before its run.end): %d results in "
                        "%s%s", ending.name, summary.spectra, outcome.path, cut)  # fmt: skip
        else:
            log.info("run %r finished: %d spectra, %d PSMs at 1%% FDR, results in %s", ending.name, summary.spectra,
                     summary.psms_at_1pct, outcome.path)  # fmt: skip
        expected = ending.state.expected if ending.state is not None else None
        self._done(Finished(summary, outcome.path, expected))

    def _again(self, ending: _Ending) -> None:
        assert self._wake is not None
        (self._live if ending.state is not None else self._left).append(ending)
        self._wake.set()

    def _set_aside(self, ending: _Ending, outcome: FinishOutcome) -> None:
        """A run that could not be finished: its journal (a live run's written out first) moved aside with the
        reason, said."""
        wrote = f"; its rows without q-values are in {outcome.path}" if outcome.path else "; no results file"
        journal = ending.journal
        if ending.state is not None:
            kept = self._closed(ending.state, delete=False)
            journal = kept.path if kept is not None and kept.path.exists() else None
        where = ""
        if journal is not None:
            try:
                where = f"; its journal is in {set_aside(journal, outcome.error)}"
            except OSError as e:
                where = f"; its journal {journal} could not be moved aside ({e.strerror or e})"
        log.error("run %r could not be finished (%s)%s%s", ending.name, outcome.error, wrote, where)

    def _closed(self, state: RunState, *, delete: bool = True) -> RunJournal | None:
        """A live run is over: its journal closed (deleted, unless not ``delete``), the run's metrics told."""
        assert self.runs is not None
        journal = self._journal_of.pop(state.live, None)
        if journal is not None and self.journals is not None:
            self.journals.close(journal, delete=delete)
        self.record(Runs(len(self.runs), finished=state.name, still_open=self.runs.has(state.name)))
        if self._idle() and time.monotonic() - self._trimmed > TRIM_EVERY_S:
            self._trimmed = time.monotonic()
            asyncio.get_running_loop().call_later(TRIM_AFTER_S, self._trim)
        return journal

    def _idle(self) -> bool:
        assert self.runs is not None
        return not self._busy and not len(self.runs)

    def _trim(self) -> None:
        """Nothing open still: what the runs held goes back to the system — their cyclic garbage collected (the
        workers collect the oldest generation seldom), the heap trimmed (`give_back_heap`), in a thread."""
        if self._idle():
            asyncio.get_running_loop().run_in_executor(None, give_back_heap)

    def _done(self, done: Finished) -> None:
        self.finished.append(done)
        self.on_finished(done)


def check_results_folder(folder: str | Path) -> None:
    """A daemon's results folder at start: writable (`check_writable`), with `MIN_FREE_BYTES` free at least;
    `InputError` (exit code 2) saying which."""
    check_writable(folder)
    try:
        st = os.statvfs(folder)
    except OSError:
        return
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES:
        raise InputError(f"results folder full: {folder} has {free / 1e6:.1f} MB free (rtsearch needs "
                         f"{MIN_FREE_BYTES / 1e6:.0f} MB at least to start: journals and results files)")  # fmt: skip
