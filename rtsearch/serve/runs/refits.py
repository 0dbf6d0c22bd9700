"""The daemon's refit process: live discriminant refits and each finished run's final FDR and results file.

Live refits are seconds of NumPy at most, and finishing a long run (its final
discriminant, q-values, string building and writing) more; in a thread of the
daemon either would hold the GIL against the engine workers and the event loop
(p99 latency), so they run in a process of their own, spawned before intake opens.
It opens the daemon's target there once (`SearchTarget.reopen`, on NumPy) to build
run tables.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rtsearch.io.results import write_run_results
from rtsearch.matches import ScoredBatch
from rtsearch.search.live import RunSummary, run_summary
from rtsearch.search.table import PsmTable
from rtsearch.search.target import Reopen, SearchTarget
from rtsearch.serve.children.calls import CallChild
from rtsearch.serve.children.runtime import give_back_heap
from rtsearch.serve.engine.jobs import RunState
from rtsearch.serve.runs.journal import journal_table

log = logging.getLogger(__name__)
T = TypeVar("T")
STOP_S = 10.0  # at shutdown, what the refit process runs may take this long to finish; then it is killed

_OPENED: dict[Reopen, SearchTarget] = {}  # in the refit process: targets opened for finishing runs
FINISH_ROWS = 500_000  # PSMs finished in one task at most (runs are never split): the process's heap given back after


@dataclass(frozen=True)
class RunToFinish:
    """A run for the refit process to finish into ``path`` (claimed by the daemon): a live run's PSMs (``batch``,
    with its answers' counts ``by_status``), or a journal an earlier daemon left (``journal``: read there)."""

    name: str
    path: Path
    batch: ScoredBatch | None = None
    by_status: dict[str, int] = field(default_factory=dict)
    journal: Path | None = None

    @property
    def rows(self) -> int:
        return len(self.batch) if self.batch is not None else 0


@dataclass(frozen=True)
class FinishOutcome:
    """How finishing a run went: its summary and file; or ``error`` (``disk``: the folder would not take the file —
    try again later; else the run itself could not be finished, and ``path`` holds what could be written, if
    anything); ``cut``: bytes of a journal's cut-short last record, lost."""

    summary: RunSummary | None = None
    path: Path | None = None
    error: str = ""
    disk: bool = False
    cut: int = 0


def finish_runs(
    reopen: Reopen | SearchTarget, runs: list[RunToFinish], provenance: dict[str, Any] | None = None
) -> list[FinishOutcome]:
    """In the refit process (or, given a target, anywhere): each run's final discriminant, q-values, summary and
    results file — runs that end together finished in one task (a task a run cost more than the run when thousands
    of small runs end a minute)."""
    if isinstance(reopen, Reopen):
        if reopen not in _OPENED:
            _OPENED[reopen] = reopen()
        target = _OPENED[reopen]
    else:
        target = reopen
    return [_finish(target, run, provenance) for run in runs]


def _finish(target: SearchTarget, run: RunToFinish, provenance: dict[str, Any] | None) -> FinishOutcome:
    """One run (see `finish_runs`); never raises."""
    cut, by_status = 0, run.by_status
    table: PsmTable | None = None
    try:
        if run.journal is not None:
            _, table, by_status, cut = journal_table(run.journal, target)
        else:
            assert run.batch is not None
            table = PsmTable(target)
            table.add(run.batch)
        table.finalize()
        outcome = FinishOutcome(run_summary(run.name, table, by_status), write_run_results(table, run.path,
                                                                                           provenance), cut=cut)
        if run.journal is not None:  # here, at once: a stop between the two would finish it twice
            run.journal.unlink(missing_ok=True)
        return outcome
    except OSError as e:
        return FinishOutcome(error=f"{run.path}: {e.strerror or e}", disk=True)
    except Exception as e:  # a run whose FDR fails: its rows without q-values, if even that can be written
        why = f"{type(e).__name__}: {e}"
        log.exception("run %r could not be finished", run.name)
        if table is None:  # its journal could not be read: set aside as it is
            return FinishOutcome(error=why, cut=cut)
        try:
            table.finalize_without_fdr()
            return FinishOutcome(path=write_run_results(table, run.path, provenance), error=why, cut=cut)
        except Exception:  # noqa: BLE001  # nothing could be written: the journal, set aside, is what is left
            return FinishOutcome(error=why, cut=cut)


def _started() -> None:
    """Run once in the refit process at start-up, so it is spawned before intake opens."""


class Refitter:
    """The refit process of one daemon (a `CallChild` at nice 10: its fits are background work that must not take the
    CPU from the processes answering; on 2 cores at ten times capacity it took 55-80 % of a core as `top -H` read it);
    a new one replaces it if it dies."""

    def __init__(self) -> None:
        self._calls = CallChild("refit", nice=10)

    def start(self) -> concurrent.futures.Future[None]:
        """Start the process now; the future is done once it runs."""
        return self._calls.submit(_started)

    def refit(self, states: list[RunState]) -> None:
        """Hand the runs' due live-discriminant refits to the process; each comes back into its run."""
        for state in states:
            with state.lock:
                refit = state.live.refit_due()
            if refit is None:
                continue
            try:  # outside the run's lock: a refit done already installs itself in this thread
                self._calls.submit(refit).add_done_callback(functools.partial(_install, state))
            except RuntimeError as e:  # shut down: keep the discriminant
                log.warning("run %r: live discriminant refit not run: %s", state.name, e)
                with state.lock:
                    state.live.install(None)

    def finish(
        self, reopen: Reopen, runs: list[RunToFinish], provenance: dict[str, Any] | None = None
    ) -> concurrent.futures.Future[list[FinishOutcome]]:
        """Finish ``runs`` in the process (`finish_runs`)."""
        done = self._calls.submit(finish_runs, reopen, runs, provenance)
        # the next call in the one process: the runs' memory back to the system (once the call that held them returned)
        with contextlib.suppress(RuntimeError):
            self._calls.submit(give_back_heap)
        return done

    def shutdown(self, *, timeout_s: float = STOP_S) -> None:
        """Stop the process and wait until it has ended: what waits for it is cancelled, what it runs may finish
        within ``timeout_s``, then it is killed (a run it was finishing keeps its journal: the next start finishes it).
        """
        if not self._calls.shutdown(timeout_s):
            log.warning("the refit process did not stop within %.0f s of shutdown: killed", timeout_s)


def _install(state: RunState, done: concurrent.futures.Future[Any]) -> None:
    """A refit came back (a thread of the process pool): it re-ranks its run, under the run's lock."""
    try:
        disc = done.result()
    except Exception:
        log.exception("run %r: live discriminant refit failed; ranking by the previous one", state.name)
        disc = None
    with state.lock:
        state.live.install(disc)
