"""Runs' ends in the daemon: every run journaled as it goes, finished once done, recovered after a stop.

`RunEnds` opens each run's `LiveRun` with its journal (`rtsearch.serve.journal`), and when the
run book says a run is done, finishes it on the event loop: the run's final discriminant,
q-values and results file (in the refit process when the target can be reopened there, else
in a thread), its journal deleted, its summary handed on (MQTT, the demo). A run that
never got an MS2 spectrum writes no file; one whose file cannot be written (a full disk, the folder's
permissions) is counted (``rtsearch_results_write_failures_total``, alerted), kept in its journal and
tried again, every `WRITE_RETRY_S` doubling up to `WRITE_RETRY_MAX_S` — at a stop, the next start
finishes it. At start, `open` checks the results folder is writable and finishes the journals an
earlier daemon left (SIGKILL, a power cut).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtsearch.config import ServeConfig
from rtsearch.io.results import check_writable, claim_results_path, write_run_results
from rtsearch.matches import concat_batches
from rtsearch.search.live import LiveRun, RunSummary
from rtsearch.search.target import SearchTarget
from rtsearch.serve.jobs import RunState
from rtsearch.serve.journal import Journals, RunJournal, recover
from rtsearch.serve.refits import Refitter
from rtsearch.serve.runs import RunBook
from rtsearch.serve.stats import ResultsWrite, Runs

log = logging.getLogger(__name__)

LIVE_Q_REFRESH = 0.01  # running q-values read off a curve at most 1 % of the run old (`RunningFdr`)
WRITE_RETRY_S, WRITE_RETRY_MAX_S = 1.0, 60.0  # a results file not written is tried again after these


@dataclass
class Finished:
    """A finalized run: its summary and results file."""

    summary: RunSummary
    path: Path
    expected: int | None = None


class RunEnds:
    """Runs' journals and ends (see the module docstring); ``runs`` is the daemon's run book."""

    def __init__(
        self, target: SearchTarget, cfg: ServeConfig, *, refitter: Refitter, record: Callable[..., None],
        on_finished: Callable[[Finished], None], recover_journals: bool = True,
    ) -> None:  # fmt: skip
        """``recover_journals``: `open` finishes the journals an earlier daemon left (lanes but 0: not theirs)."""
        self.recover_journals = recover_journals
        self.target = target
        self.cfg = cfg
        self.refitter = refitter
        self.record = record
        self.on_finished = on_finished
        self.runs: RunBook | None = None
        self.finished: list[Finished] = []
        self.journals: Journals | None = None
        self._journal_of: dict[LiveRun, RunJournal] = {}
        self._claimed: set[Path] = set()  # results files this daemon has claimed (`claim_results_path`)
        self._tasks: set[asyncio.Task[Any]] = set()
        self.provenance: dict[str, Any] | None = None  # beside each results file (`rtsearch.io.provenance`)

    async def open(self) -> None:
        """Check the results folder, finish an earlier daemon's journals there, start journaling."""
        cfg = self.cfg
        check_writable(cfg.results_dir)
        left = [] if not self.recover_journals else await asyncio.to_thread(
            recover, cfg.results_dir, self.target, cfg.results_format, self._claimed, self.provenance)  # fmt: skip
        for done in left:
            self._done(Finished(done.summary, done.path))
        self.journals = Journals(cfg.results_dir, self.target)

    def close(self) -> None:
        """Stop journaling (runs not finished keep their journal, for the next start)."""
        if self.journals is not None:
            self.journals.shutdown()

    def new_run(self, name: str) -> LiveRun:
        """A run's `LiveRun`, its every batch journaled before its results are published."""
        assert self.journals is not None, "open() first"
        journal = self.journals.open(name)
        live = LiveRun(name, self.target, refits="deferred", q_refresh=LIVE_Q_REFRESH, sink=journal.append)
        self._journal_of[live] = journal
        return live

    def maybe_finish(self, state: RunState) -> None:
        """Finish ``state`` if it is done and nobody finishes it yet (the event loop)."""
        assert self.runs is not None
        if not self.runs.finish(state):
            return
        self.record(Runs(len(self.runs)))
        task = asyncio.ensure_future(self._finish(state))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the runs being finished are."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while self._tasks:
                    await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _finish(self, state: RunState) -> None:
        assert self.runs is not None
        live, cfg = state.live, self.cfg
        if state.expected is not None and state.expected != live.answered + state.ms1:
            log.warning("run %r: run.end announced %d spectra, received %d MS2 + %d MS1", live.name,
                        state.expected, live.answered, state.ms1)  # fmt: skip
        if state.duplicates:
            log.warning("run %r: %d spectra repeated a scan number of the run", live.name, state.duplicates)
        journal = self._journal_of.pop(live)
        if live.answered:
            path = claim_results_path(cfg.results_dir, live.name, cfg.results_format, self._claimed)
            summary, path = await self._finalize(live, path)
        else:  # a run.end for a run that never sent an MS2 spectrum (or for one finished already)
            log.info("run %r ended with no MS2 spectrum (%d MS1): no results file", live.name, state.ms1)
        if self.journals is not None:
            self.journals.close(journal, delete=True)
        self.record(Runs(len(self.runs), finished=live.name, still_open=self.runs.has(live.name)))
        if live.answered:
            log.info("run %r finished: %d spectra, %d PSMs at 1%% FDR, results in %s", live.name, summary.spectra,
                     summary.psms_at_1pct, path)  # fmt: skip
            self._done(Finished(summary, path, state.expected))

    async def _finalize(self, live: LiveRun, path: Path) -> tuple[RunSummary, Path]:
        """The run's final FDR and results file: in the refit process when the target can be reopened there."""
        reopen = self.target.reopen()
        if reopen is not None and live.table.batches:
            batch = await asyncio.to_thread(concat_batches, live.table.batches)
            try:
                return await asyncio.wrap_future(
                    self.refitter.finish(reopen, batch, live.name, dict(live.by_status), path, self.provenance)
                )
            except Exception as e:  # the pool is gone (shutdown, a crash) or the child failed: do it here
                log.warning("run %r: finishing in the refit process failed (%s: %s); finishing here", live.name,
                            type(e).__name__, e)  # fmt: skip
        table, summary = await asyncio.to_thread(live.finish)
        return summary, await self._write(live.name, table, path)

    async def _write(self, run: str, table: Any, path: Path) -> Path:
        """The run's file written, tried again after a pause as long as it cannot be (see the module docstring):
        only the write, the run's q-values are computed once."""
        pause = WRITE_RETRY_S
        while True:
            try:
                return await asyncio.to_thread(write_run_results, table, path, self.provenance)
            except OSError as e:
                self.record(ResultsWrite())
                log.error("run %r: results file %s not written (%s); kept in its journal, trying again in %.0f s",
                          run, path, e.strerror or e, pause)  # fmt: skip
                await asyncio.sleep(pause)
                pause = min(2 * pause, WRITE_RETRY_MAX_S)

    def _done(self, done: Finished) -> None:
        self.finished.append(done)
        self.on_finished(done)
