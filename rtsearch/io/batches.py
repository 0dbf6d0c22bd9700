"""Spectrum files as `SpectraBatch` es; a large plain MGF or mzML parsed by several processes at once.

Reading was the longest phase of ``rtsearch search`` on the GPU machine (5.8 of 7.2 s for the 50,000-spectrum
bench MGF, the since-deleted probe `search_phases.py`, docs/history/RESULTS.md): one thread parsing while the main
one scores, both
holding the GIL by turns. A plain MGF or mzML of at least `PARALLEL_MIN_BYTES` is read by one worker process for
every two CPUs (when at least `MIN_WORKERS` parts can be had), cut into `PARTS_PER_WORKER` parts a worker, each
cut just after an entry (`rtsearch.io.parts`); each worker sends back its part's batches. The workers are
forked when that is safe (Linux, this process still has one thread and no CuPy: a `PartPool` made first thing,
as `rtsearch.search.offline.SpectrumReader` does) and spawned otherwise; sixteen spawned workers each
importing NumPy and Arrow took longer than the parsing they then did (docs/history/RESULTS.md). Batches come out in
file order; the spectra are those `read_spectra` gives (tests/unit/test_batches.py). If a part cannot be read
(a corrupt file) or a worker cannot run, the file is read again in this process from the start, the spectra
already given skipped, so that the error names its line as the serial reader does.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

from lxml import etree

from rtsearch.batch import SpectraBatch
from rtsearch.config.environment import tuning
from rtsearch.errors import InputError
from rtsearch.io.parts import Plan, layout_of, plan, read_part
from rtsearch.io.spectra import read_spectra
from rtsearch.types import Spectrum

PARALLEL_MIN_BYTES = 64 << 20  # smaller files: one process (spawning workers costs ~0.5 s)
PART_MIN_BYTES = 8 << 20  # no part smaller than this
MIN_WORKERS = 4  # on 2 cores, 2 workers read the 241 MB bench MGF in 2.24 s, one process in 1.82 s
# parts a worker: with one, every part is parsed at once and the first spectra come when nearly all do; with more,
# the first round's come after a fraction of the parsing and are scored while the rest is parsed
PARTS_PER_WORKER = 2


def parts_per_worker() -> int:
    """`PARTS_PER_WORKER`, or the ``parts_per_worker`` knob (`rtsearch.config.environment`)."""
    given = tuning().parts_per_worker
    return PARTS_PER_WORKER if given is None else given
R = TypeVar("R")


class PartPool:
    """Worker processes for the parts of large MGFs, shared by every run read; forked at once when it is safe
    (make it before starting threads or importing CuPy), else spawned as parts come."""

    def __init__(self, workers: int) -> None:
        self.size = workers
        self.forked = sys.platform == "linux" and threading.active_count() == 1 and "cupy" not in sys.modules
        context = multiprocessing.get_context("fork" if self.forked else "spawn")
        self.executor = ProcessPoolExecutor(workers, mp_context=context, initializer=_one_arrow_thread)
        if self.forked:
            self.executor.submit(int)  # forks every worker now, from this one thread

    def map(self, fn: Callable[..., R], *items: Iterable[Any]) -> list[R]:
        """``fn`` of each of ``items`` (zipped), in the workers (here when they cannot run it)."""
        args = list(zip(*items, strict=True))
        try:
            return list(self.executor.map(fn, *zip(*args, strict=True))) if args else []
        except Exception:
            return [fn(*a) for a in args]

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def _one_arrow_thread() -> None:
    """A worker parses with one Arrow thread: the workers already use every core (two parts on two cores: 1.70 s
    with Arrow's threads, 1.29 s without, the since-deleted probe `reader_timeline.py`)."""
    import pyarrow

    pyarrow.set_cpu_count(1)


def workers_for(paths: Iterable[str | Path], cap: int | None = None) -> int:
    """How many worker processes the largest of ``paths`` is read by, at most ``cap`` (default: one for every two
    CPUs, `default_workers`; 0: each is read in this process)."""
    return max((_workers(Path(p), cap) for p in paths), default=0)


def default_workers() -> int:
    """One worker for every two CPUs: the search's own threads need cores while the workers parse (CuPy's import,
    the index's copy to the GPU, the inputs' hashing). On the 16-core H200 machine the 50,000-spectrum search took
    2.15-2.38 s with 8 workers against 2.48-2.57 s with 16 in one call while the search spawned its workers, and
    1.99-2.20 s against 2.06-2.15 s once it forked them (docs/history/RESULTS.md, 2026-11-28 14:48-15:31 and 16:40): no
    worse than 16 either way."""
    return max(1, (os.cpu_count() or 1) // 2)


def _workers(p: Path, cap: int | None = None) -> int:
    size = p.stat().st_size if layout_of(p) and p.is_file() else 0
    workers = min(default_workers() if cap is None else cap, size // PART_MIN_BYTES)
    return workers if size >= PARALLEL_MIN_BYTES and workers >= MIN_WORKERS else 0


def read_batches(path: str | Path, *, batch_size: int, pool: PartPool | None = None) -> Iterator[SpectraBatch]:
    """The MS2 spectra of ``path`` (any format `read_spectra` reads) as batches of at most ``batch_size``; a
    large plain MGF or mzML in parts, by ``pool``'s workers (or by workers spawned for it)."""
    p = Path(path)
    if workers := _workers(p, pool.size if pool else None):
        yield from _parallel(p, batch_size, workers, pool)
    else:
        yield from _batched(read_spectra(p), batch_size)


def _batched(spectra: Iterable[Spectrum], batch_size: int) -> Iterator[SpectraBatch]:
    """Batches of ``spectra``; at an error, the spectra read before it, then the error."""
    batch: list[Spectrum] = []
    try:
        for sp in spectra:
            batch.append(sp)
            if len(batch) == batch_size:
                yield SpectraBatch.of(batch)
                batch = []
    except InputError:
        if batch:
            yield SpectraBatch.of(batch)
        raise
    if batch:
        yield SpectraBatch.of(batch)


def _map(fn: Callable[..., R], *items: Iterable[Any]) -> list[R]:
    return [fn(*args) for args in zip(*items, strict=True)]


def _read_part(plan: Plan, k: int, batch_size: int) -> list[SpectraBatch] | None:
    """One part's batches (in a worker process); None when it cannot be read whole."""
    try:
        return list(_batched(read_part(plan, k), batch_size))
    except (InputError, etree.Error):
        return None


def _none() -> Future[list[SpectraBatch] | None]:
    fut: Future[list[SpectraBatch] | None] = Future()
    fut.set_result(None)
    return fut


def _parallel(path: Path, batch_size: int, workers: int, shared: PartPool | None) -> Iterator[SpectraBatch]:
    pool = shared or PartPool(workers)
    parts = workers * parts_per_worker()
    try:  # the entries counted in the workers: the byte scans hold the GIL that opening the target needs
        p = plan(path, parts, pool.map)
    except Exception:
        p = plan(path, parts, _map)
    if p is None:
        if shared is None:
            pool.close()
        yield from _batched(read_spectra(path), batch_size)
        return
    given = 0
    futures: list[Future[list[SpectraBatch] | None]] = []
    try:
        try:
            futures += [pool.executor.submit(_read_part, p, k, batch_size) for k in range(len(p.parts))]
        except Exception:  # a shared pool that broke on an earlier run: read here
            futures.append(_none())
        for fut in futures:
            try:
                batches = fut.result()
            except Exception:  # a worker that could not start or died (no importable __main__, memory): read here
                batches = None
            if batches is None:
                break
            for batch in batches:
                given += len(batch)
                yield batch
        else:
            return
    finally:
        if shared is None:
            pool.close()
        else:
            for fut in futures:
                fut.cancel()
    yield from _batched(islice(read_spectra(path), given, None), batch_size)  # to raise the serial reader's error
