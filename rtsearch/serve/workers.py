"""The daemon's engine workers: threads that take micro-batches, score them and publish the results.

Each worker thread binds its own CUDA stream (`Backend.bind_worker`), warms the
engine up, then loops: wait under the daemon's lock until the `MicroBatcher`
releases a batch, score it with the lock released (the GPU's time, the GIL
mostly free), then, under the lock again, build the results with running
q-values (`LiveRun`) and publish them (`Daemon._answer`). Live discriminant
refits, and each finished run's final FDR and results file (`finish_run`), run in
a process of their own (`WorkerLoop._refit`); Python's cyclic GC
runs when a worker goes idle (`collect_garbage`).

`WorkerLoop` is the `Daemon`'s half that runs off the event loop; it reads the
daemon's shared state declared below.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rtsearch.search.live import RunSummary, run_summary
from rtsearch.types import ResultStatus

if TYPE_CHECKING:
    from rtsearch.config import ServeConfig
    from rtsearch.scoring.database.engine import Reload, ScoredBatch, SearchEngine
    from rtsearch.search.live import LiveRun
    from rtsearch.search.table import RunTable
    from rtsearch.serve.batching import EngineTimeModel, MicroBatcher
    from rtsearch.serve.daemon import Job
    from rtsearch.serve.metrics import DaemonMetrics

log = logging.getLogger("rtsearch.serve.daemon")
ResultsTarget = tuple[str, str, str, int]  # write_run_results' folder, run, format, part

SLOW_BATCH_S = float(os.environ.get("RTSEARCH_SLOW_BATCH_S", "0.5"))  # slower engine batches are logged
GC_IDLE, GC_OVERDUE = 700, 20_000  # pending allocations before a collection when idle / regardless


def single_threaded_blas() -> None:
    """One BLAS thread in this process (the daemon's and its refit process).

    The daemon's matrix work is small (a discriminant's matrix-vector product per batch,
    fits on a few thousand rows), and OpenBLAS's worker threads spin between calls: on the
    GPU machine they took 0.5 of a core in the daemon and 2-4 cores in the refit process at
    20,000 spectra/s, next to the threads that score and publish.
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def collect_garbage(*, idle: bool) -> None:
    """Python's cyclic GC on the daemon's terms: when the engine is idle, or when overdue.

    The daemon turns automatic collection off once warm: an automatic pass starts wherever an
    allocation crosses the threshold, often mid-batch, and a gen-1 pass over queued spectra
    takes milliseconds (a gen-2 one tens), a visible share of p99 at a few hundred spectra a
    second. Here the workers collect, with CPython's own generation rule, after publishing a
    batch when nothing waits, or regardless once ``GC_OVERDUE`` allocations are pending.
    """
    count0, count1, count2 = gc.get_count()
    if count0 < (GC_IDLE if idle else GC_OVERDUE):
        return
    gc.collect(2 if count2 >= 10 and count1 >= 10 else 1 if count1 >= 10 else 0)


_LOADED: dict[tuple[str, str], Any] = {}  # in the refit process: indexes and libraries loaded for finishing runs


def _table(reload: Reload) -> RunTable:
    """An empty table of what ``reload`` names, its index or library memory-mapped here once."""
    from rtsearch.database.store import load_index
    from rtsearch.library.store import load_library
    from rtsearch.search.libtable import LibraryTable
    from rtsearch.search.table import PsmTable

    key = (reload.kind, reload.folder)
    if key not in _LOADED:
        _LOADED[key] = load_library(reload.folder) if reload.kind == "library" else load_index(reload.folder)
    if reload.kind == "library":
        return LibraryTable(_LOADED[key], primary=reload.primary)
    return PsmTable(_LOADED[key], primary=reload.primary)


def finish_run(
    reload: Reload, batch: ScoredBatch, name: str, by_status: dict[str, int], results: ResultsTarget
) -> tuple[RunSummary, Path]:
    """In the refit process: a run's final discriminant, q-values, summary and results file.

    Seconds of NumPy and string building for a long run; in the daemon's process they would hold
    the GIL against the next run's first spectra.
    """
    from rtsearch.serve.publish import write_run_results

    table = _table(reload)
    table.add(batch)
    table.finalize()
    return run_summary(name, table, by_status), write_run_results(table, *results)


def _started() -> None:
    """Run once in the refit process at start-up, so it is spawned before intake opens."""


class WorkerLoop:
    """Engine threads and the refit process of a `Daemon` (see the module docstring)."""

    engine: SearchEngine
    cfg: ServeConfig
    metrics: DaemonMetrics
    model: EngineTimeModel
    batcher: MicroBatcher[Job]
    clock: Callable[[], int]
    _cv: threading.Condition
    _in_flight: int
    _closing: bool
    _abandoned: bool
    _workers: list[threading.Thread]
    _fitter: concurrent.futures.ProcessPoolExecutor

    def _answer(self, pairs: Sequence[tuple[dict[str, Any], Job]]) -> None: ...
    def _unscored(self, jobs: list[Job], status: ResultStatus, reason: str) -> None: ...

    async def _start_workers(self) -> None:
        """Start the engine threads and the refit process; each warms up before the daemon reports ready."""
        warm: list[asyncio.Future[None]] = [asyncio.wrap_future(self._fitter.submit(_started))]
        for k in range(self.cfg.workers):
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            w = threading.Thread(target=self._worker, args=(done,), name=f"engine_{k}", daemon=True)
            self._workers.append(w)
            w.start()
            warm.append(asyncio.wrap_future(done))
        await asyncio.gather(*warm)
        # what exists now (index, kernels, caches) lives as long as the daemon: keep it out of GC passes;
        # from here on the workers collect when idle (`collect_garbage`)
        gc.collect()
        gc.freeze()
        gc.disable()

    def _warm_up(self) -> None:
        """Run every engine path in this worker before intake opens; seed the engine-time model.

        CuPy compiles kernels on first use (seconds each on a fresh machine): spectra made
        from index peptides' own fragments reach candidates, full scoring and features, with
        known, unknown and several charges, at a few batch sizes, so no compile lands on a
        real spectrum's latency.
        """
        spectra = self.engine.warm_up_spectra(64)
        for size in sorted({1, 7, 64, 512, self.cfg.max_batch}):
            batch = (spectra * (size // len(spectra) + 1))[:size]
            t0 = time.perf_counter()
            self.engine.score(batch)
            with self._cv:
                self.model.observe(size, time.perf_counter() - t0)

    def _worker(self, warm: concurrent.futures.Future[None]) -> None:
        """An engine thread: warm up, then take batches from the batcher, score and answer them.

        The batch is taken, and its results built and published, under the shared lock; the
        scoring itself (the GPU's time, the GIL released) runs outside it.
        """
        try:
            self.engine.backend.bind_worker()
            self._warm_up()
        except BaseException as e:
            warm.set_exception(e)
            return
        warm.set_result(None)
        while (jobs := self._take()) is not None:
            t0 = time.perf_counter()
            try:
                scored = self.engine.score([j.spectrum for j in jobs])
            except Exception as e:  # an engine failure answers the batch; it never loses it
                log.exception("engine failed on a batch of %d spectra", len(jobs))
                with self._cv:
                    self._in_flight -= 1
                    self.metrics.in_flight.set(self._in_flight)
                    self._unscored(jobs, ResultStatus.UNIDENTIFIED, f"engine error: {type(e).__name__}: {e}"[:300])
                    self._cv.notify()  # this worker is free again: another may be waiting on the batcher
                continue
            t1 = time.perf_counter()
            seconds = t1 - t0
            with self._cv:
                t2 = time.perf_counter()
                self._in_flight -= 1
                self.metrics.in_flight.set(self._in_flight)
                self.model.observe(len(jobs), seconds)
                self.metrics.engine_batch.observe(seconds)
                if seconds > SLOW_BATCH_S:
                    log.warning("slow engine batch: %d spectra in %.1f ms (model predicted %.1f ms); stages %s",
                                len(jobs), seconds * 1e3, self.model.predict(len(jobs)) * 1e3,
                                {k: round(v * 1e3, 2) for k, v in scored.stages.items()})  # fmt: skip
                results = self._results(jobs, scored)
                t3 = time.perf_counter()
                self._answer(results)
                self._refit({id(j.state): j.state.live for j in jobs}.values())
                self._cv.notify()  # this worker is free again: another may be waiting on the batcher
                idle = not len(self.batcher)
            t4 = time.perf_counter()
            collect_garbage(idle=idle)
            self.metrics.worker_time(score=seconds, lock=t2 - t1, results=t3 - t2, publish=t4 - t3,
                                     gc=time.perf_counter() - t4)  # fmt: skip

    def _take(self) -> list[Job] | None:
        """Wait for the next batch (``None``: shutting down and nothing is left)."""
        with self._cv:
            while True:
                if self._abandoned:
                    return None
                jobs = self.batcher.take(workers_free=1, now=self._closing)
                if jobs:
                    break
                if self._closing:
                    return None
                wake = self.batcher.wake_at()
                self._cv.wait(None if wake is None else max(0.0, (wake - self.clock()) / 1e9))
            self._in_flight += 1
            m = self.metrics
            m.in_flight.set(self._in_flight)
            received = np.fromiter((j.received_mono for j in jobs), dtype=np.int64, count=len(jobs))
            m.queue_wait.observe_many((self.clock() - received) / 1e9)
            m.batch_size.observe(len(jobs))
            m.queue_depth.set(len(self.batcher))
            return jobs

    def _results(self, jobs: list[Job], scored: ScoredBatch) -> list[tuple[dict[str, Any], Job]]:
        """Results of a scored batch, run by run (running q-values); the lock is held."""
        out: list[tuple[dict[str, Any], Job]] = []
        groups: dict[int, list[int]] = {}
        for i, j in enumerate(jobs):
            groups.setdefault(id(j.state), []).append(i)
        for rows in groups.values():
            part = scored if len(groups) == 1 else scored.take(rows)
            live = jobs[rows[0]].state.live
            out.extend(zip(live.add_scored(part), (jobs[r] for r in rows), strict=True))
        return out

    def _refit(self, lives: Iterable[LiveRun]) -> None:
        """Hand due live-discriminant refits to the refit process (the lock is held)."""
        for live in lives:
            if (refit := live.refit_due()) is not None:
                try:
                    self._fitter.submit(refit).add_done_callback(functools.partial(self._install, live))
                except RuntimeError as e:  # shut down, or the refit process died: keep the discriminant
                    log.warning("run %r: live discriminant refit not run: %s", live.name, e)
                    live.install(None)

    def _install(self, live: LiveRun, done: concurrent.futures.Future[Any]) -> None:
        """The refit came back (a thread of the process pool): it re-ranks its run, under the lock."""
        try:
            disc = done.result()
        except Exception:
            log.exception("run %r: live discriminant refit failed; ranking by the previous one", live.name)
            disc = None
        with self._cv:
            live.install(disc)
