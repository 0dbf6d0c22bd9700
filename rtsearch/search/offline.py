"""Offline search: spectrum files → a `SearchTarget` → `PsmTable` (FDR) → columns for a results file.

The same target the daemon calls scores every batch, whatever its kind, so a
result offline is the result online; this module only reads files, batches
spectra and reports progress.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rtsearch.batch import SpectraBatch
from rtsearch.io.batches import PartPool, read_batches, workers_for
from rtsearch.io.spectra import count_spectra
from rtsearch.matches import ScoredBatch, Scorer
from rtsearch.search.fdr import RULE
from rtsearch.search.live import named
from rtsearch.search.table import PsmTable
from rtsearch.search.target import SearchTarget

log = logging.getLogger(__name__)

# GPU: batches scored on this many threads, each on its own CUDA stream, so that one batch's host work (queries,
# features, names) overlaps another's kernels; answers kept in the order read
SCORERS = 2
# spectra a batch: the 50,000-spectrum search 3.00-3.26 s with 4,096 against 3.47-3.52 s with 1,024 in one call on
# the H200 machine, fewer batches' fixed costs (docs/history/RESULTS.md, 2026-11-28 14:48-15:31)
BATCH_SIZE = 4096


@dataclass
class SearchSummary:
    spectra: int
    psms_at_1pct: int
    peptides_at_1pct: int
    seconds: float
    levels: tuple[str, str] = ("PSMs", "peptides")  # what the two counts count (the target's `levels`)
    psms_at_5pct: int = 0  # a run too small for a list at 1 % (under 100 targets: `rtsearch.search.fdr.RULE`)
    ms1_seconds: float | None = None  # ``--ms1``: the precursors' elution, traced after the search

    @property
    def total_seconds(self) -> float:
        return self.seconds + (self.ms1_seconds or 0.0)

    @property
    def spectra_per_second(self) -> float:
        return self.spectra / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        return (
            f"{self.spectra:,} spectra, {self.psms_at_1pct:,} {self.levels[0]} and {self.peptides_at_1pct:,} "
            f"{self.levels[1]} at 1% FDR ({self.psms_at_5pct:,} at 5%; q = {RULE}), {self.total_seconds:.1f} s ("
            + (f"search {self.seconds:.1f} s, {self.spectra_per_second:,.0f} spectra/s; MS1 elution "
               f"{self.ms1_seconds:.1f} s)" if self.ms1_seconds is not None else
               f"{self.spectra_per_second:,.0f} spectra/s)")
        )  # fmt: skip


def _parts(batch: SpectraBatch, limit: int | None) -> list[SpectraBatch]:
    """``batch`` in batches of ``limit`` spectra at most (`SearchTarget.batch_limit`)."""
    if not limit or len(batch) <= limit:
        return [batch]
    return [batch.take(range(a, min(a + limit, len(batch)))) for a in range(0, len(batch), limit)]


def search_runs(
    runs: Sequence[str | Path] | SpectrumReader, target: SearchTarget, *, batch_size: int = BATCH_SIZE,
    progress: Callable[[int, int | None], None] | None = None, scorers: Sequence[Scorer] = (),
) -> tuple[PsmTable, SearchSummary]:  # fmt: skip
    """Search every MS2 spectrum of ``runs`` against ``target``; q-values are computed per run.

    Spectra without a charge keep none: the target decides which charges to try. ``runs`` may be a
    `SpectrumReader` started earlier (reading while the target opened); else one is started here.
    ``progress(done, total)`` is called once each batch is scored (``total`` ``None`` when a file's spectra
    cannot be counted up front). On a GPU the batches are scored on `SCORERS` threads, each on its own CUDA
    stream; the table keeps them in the order read either way (tests/gpu/test_offline_scorers.py). A target whose
    spectra cost seconds each cuts batches to its ``batch_limit``; an exception (Ctrl-C) drops what is queued
    without waiting for the batch being scored. ``scorers``: functions that score a batch and name its matches
    elsewhere (engine processes: top-down on the CPU, a process a core), each on a thread of its own, in place of
    the target's own scoring here.
    """
    t0 = time.perf_counter()
    reader = runs if isinstance(runs, SpectrumReader) else SpectrumReader(runs, batch_size=batch_size)
    table = PsmTable(target)
    done, waited = 0, 0.0
    free: queue.SimpleQueue[Scorer] = queue.SimpleQueue()  # a scorer a thread, each busy with one batch at a time
    for scorer in scorers or [lambda batch: named(target, target.score(batch))] * (SCORERS if target.backend.is_gpu
                                                                                     else 1):
        free.put(scorer)
    threads = free.qsize()
    pending: collections.deque[concurrent.futures.Future[ScoredBatch]] = collections.deque()

    def score(batch: SpectraBatch) -> ScoredBatch:  # named now: reading is often still under way
        scorer = free.get()
        try:
            return scorer(batch)
        finally:
            free.put(scorer)

    def add(scored: ScoredBatch) -> None:
        nonlocal done
        table.add(scored)  # in the order read
        if not done:
            log.debug("first batch scored")
        done += len(scored)
        if progress:
            progress(done, reader.total)

    limit = target.batch_limit
    pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="scorer",
                                                 initializer=target.backend.bind_worker)  # fmt: skip
    try:
        with reader:
            batches = iter(reader)
            while True:
                t = time.perf_counter()
                batch = next(batches, None)
                waited += time.perf_counter() - t
                if batch is None:
                    break
                for part in _parts(batch, limit):
                    pending.append(pool.submit(score, part))
                    while pending and (len(pending) > threads or pending[0].done()):
                        add(pending.popleft().result())
            while pending:
                add(pending.popleft().result())
    except BaseException:  # Ctrl-C above all: what is queued is dropped, and the batch being scored not waited for
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    log.debug("%d spectra scored in %.2f s, %.2f s of it waiting for spectra", done, time.perf_counter() - t0, waited)
    table.finalize()
    log.debug("q-values of %d runs", len(table.discriminants))
    psms, peptides = table.counts_at(0.01)
    return table, SearchSummary(len(table), psms, peptides, time.perf_counter() - t0, target.levels,
                                table.counts_at(0.05)[0])  # fmt: skip


class SpectrumReader:
    """The MS2 spectra of ``runs`` as `SpectraBatch` es of ``batch_size`` (a batch never spans two runs), read
    ``depth`` batches ahead in a thread of its own, so that reading overlaps opening the target and scoring
    (reading is one third of a GPU search's wall: docs/history/RESULTS.md).

    ``with reader: for batch in reader: ...``; a file's error (`InputError`) is raised where its batch would
    have come, after the batches before it; leaving the ``with`` early stops the thread.
    """

    def __init__(
        self, runs: Sequence[str | Path], *, batch_size: int, depth: int = 4, readers: int | None = None
    ) -> None:
        """``readers``: worker processes for a large MGF or mzML (default one for every two CPUs,
        `rtsearch.io.batches.default_workers`; 0: none)."""
        self.total: int | None = None  # set by a counting thread beside the reading one (progress only)
        self.runs, self.batch_size = list(runs), batch_size
        self.workers = workers_for(self.runs, readers)
        self._pool = PartPool(self.workers) if self.workers else None  # forked here, before this reader's threads
        self._queue: queue.Queue[SpectraBatch | BaseException | None] = queue.Queue(depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="reader", daemon=True)
        self._counter = threading.Thread(target=self._count, name="reader-count", daemon=True)
        self._thread.start()
        self._counter.start()

    @property
    def forked(self) -> bool:
        """Whether its worker processes were forked from this one (none: ``False``): see `PartPool`."""
        return self._pool is not None and self._pool.forked

    def _count(self) -> None:
        # in the workers when there are some: a byte scan holds the GIL that opening the target needs
        expected = self._pool.map(count_spectra, self.runs) if self._pool else [count_spectra(r) for r in self.runs]
        self.total = sum(e for e in expected if e) if all(expected) else None

    def _read(self) -> None:
        try:
            read = 0
            for run in self.runs:
                for batch in read_batches(run, batch_size=self.batch_size, pool=self._pool):
                    if not read:
                        log.debug("first spectra read")
                    read += len(batch)
                    self._put(batch)
            log.debug("%d spectra read", read)
            self._put(None)
        except _Stopped:
            return
        except BaseException as exc:  # handed to the reading side, raised there
            with contextlib.suppress(_Stopped):
                self._put(exc)

    def _put(self, item: SpectraBatch | BaseException | None) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Stopped

    def __iter__(self) -> Iterator[SpectraBatch]:
        while (item := self._queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    def __enter__(self) -> SpectrumReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._counter.join()
        if self._pool is not None:
            self._pool.close()


class _Stopped(Exception):
    """The reading side left: the reader thread ends."""
