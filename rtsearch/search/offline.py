"""Offline search: spectrum files → a `SearchTarget` → `PsmTable` (FDR) → columns for a results file.

The same target the daemon calls scores every batch, whatever its kind, so a
result offline is the result online; this module only reads files, batches
spectra and reports progress.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rtsearch.batch import SpectraBatch
from rtsearch.io.spectra import count_spectra, read_spectra
from rtsearch.search.table import PsmTable
from rtsearch.search.target import SearchTarget
from rtsearch.types import Spectrum


@dataclass
class SearchSummary:
    spectra: int
    psms_at_1pct: int
    peptides_at_1pct: int
    seconds: float

    @property
    def spectra_per_second(self) -> float:
        return self.spectra / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        return (
            f"{self.spectra:,} spectra, {self.psms_at_1pct:,} PSMs and {self.peptides_at_1pct:,} peptides "
            f"at 1% FDR, {self.seconds:.1f} s ({self.spectra_per_second:,.0f} spectra/s)"
        )


def search_runs(
    runs: Sequence[str | Path], target: SearchTarget, *, batch_size: int = 1024,
    progress: Callable[[int, int | None], None] | None = None,
) -> tuple[PsmTable, SearchSummary]:  # fmt: skip
    """Search every MS2 spectrum of ``runs`` against ``target``; q-values are computed per run.

    Spectra without a charge keep none: the target decides which charges to try.
    """
    t0 = time.perf_counter()
    table = PsmTable(target)
    for batch in spectrum_batches(runs, batch_size=batch_size, progress=progress):
        table.add(target.score(SpectraBatch.of(batch)))
    table.finalize()
    psms, peptides = table.counts_at(0.01)
    return table, SearchSummary(len(table), psms, peptides, time.perf_counter() - t0)


def spectrum_batches(
    runs: Sequence[str | Path], *, batch_size: int, progress: Callable[[int, int | None], None] | None = None
) -> Iterator[list[Spectrum]]:
    """The MS2 spectra of ``runs`` in batches of ``batch_size`` (a batch never spans two runs).

    ``progress(done, total)`` is called once each batch has been processed by the caller
    (``total`` is ``None`` when a file's spectra cannot be counted up front).
    """
    expected = [count_spectra(r) for r in runs]
    grand = sum(e for e in expected if e) if all(expected) else None
    done = 0
    for run in runs:
        batch: list[Spectrum] = []
        for sp in read_spectra(run):
            batch.append(sp)
            if len(batch) >= batch_size:
                yield batch
                done += len(batch)
                batch = []
                if progress:
                    progress(done, grand)
        if batch:
            yield batch
            done += len(batch)
            if progress:
                progress(done, grand)

