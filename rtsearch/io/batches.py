"""Spectrum files as `SpectraBatch` es; a large plain MGF parsed by several processes at once.

Reading was the longest phase of ``rtsearch search`` on the GPU machine (5.8 of 7.2 s for the 50,000-spectrum
bench MGF, `bench/search_phases.py`, bench/RESULTS.md): one thread parsing while the main one scores, both
holding the GIL by turns. A plain MGF of at least `PARALLEL_MIN_BYTES` is cut into about one part per CPU
(when at least `MIN_WORKERS` parts can be had), each cut just after an ``END IONS`` line, and each part is
read by `rtsearch.io.mgf.read_mgf_part` in a worker process (spawned: no CUDA state is inherited), which
sends back its batches. Batches come out in file order; the spectra are those `read_spectra` gives
(tests/unit/test_batches.py). If a part cannot be read (a corrupt file) or a worker cannot run, the file is
read again in this process from the start, the spectra already given skipped,
so that the error names its line as the serial reader does.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from pathlib import Path

from rtsearch.batch import SpectraBatch
from rtsearch.errors import InputError
from rtsearch.io.mgf import read_mgf_part
from rtsearch.io.spectra import read_spectra, run_name
from rtsearch.types import Spectrum

PARALLEL_MIN_BYTES = 64 << 20  # smaller files: one process (spawning workers costs ~0.5 s)
PART_MIN_BYTES = 8 << 20  # no part smaller than this
MIN_WORKERS = 4  # on 2 cores, 2 workers read the 241 MB bench MGF in 2.24 s, one process in 1.82 s
_BEGIN, _END = b"BEGIN IONS", b"\nEND IONS"


def read_batches(path: str | Path, *, batch_size: int) -> Iterator[SpectraBatch]:
    """The MS2 spectra of ``path`` (any format `read_spectra` reads) as batches of at most ``batch_size``."""
    p = Path(path)
    size = p.stat().st_size if p.name.lower().endswith(".mgf") and p.is_file() else 0
    workers = min(os.cpu_count() or 1, size // PART_MIN_BYTES)
    if size >= PARALLEL_MIN_BYTES and workers >= MIN_WORKERS:
        yield from _parallel_mgf(p, batch_size, workers)
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


def _parts(path: Path, n: int) -> tuple[list[tuple[int, int]], list[int], int]:
    """About ``n`` byte ranges of whole entries, the entries before each, and where the first entry begins."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        size = len(data)
        head = data.find(_BEGIN)
        cuts = [0]
        for k in range(1, n):
            end = data.find(_END, max(size * k // n, cuts[-1]))
            line_end = data.find(b"\n", end + 1) if end >= 0 else -1
            if line_end < 0:
                break
            cuts.append(line_end + 1)
        cuts.append(size)
        parts = [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]
        before = [0]
        for a, b in parts[:-1]:
            before.append(before[-1] + data[a:b].count(_BEGIN))
    return parts, before, max(head, 0)


def _read_part(path: Path, part: tuple[int, int], head: int, before: int, batch_size: int) -> list[SpectraBatch] | None:
    """One part's batches (in a worker process); None when it cannot be read whole."""
    try:
        return list(_batched(read_mgf_part(path, run_name(path), (), part, head, before), batch_size))
    except InputError:
        return None


def _parallel_mgf(path: Path, batch_size: int, workers: int) -> Iterator[SpectraBatch]:
    parts, before, head = _parts(path, workers)
    pool = ProcessPoolExecutor(min(workers, len(parts)), mp_context=multiprocessing.get_context("spawn"))
    given = 0
    try:
        futures: list[Future[list[SpectraBatch] | None]] = [
            pool.submit(_read_part, path, part, head, n, batch_size) for part, n in zip(parts, before, strict=True)
        ]
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
        pool.shutdown(wait=False, cancel_futures=True)
    yield from _batched(islice(read_spectra(path), given, None), batch_size)  # to raise the serial reader's error
