"""Offline search: spectrum files → `Engine` → FDR → a results file.

The same `Engine` the daemon calls scores every batch; this module only reads
files, batches spectra, reports progress and writes the table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rtsearch.config import SearchConfig
from rtsearch.database.index import PeptideIndex
from rtsearch.io.results import write_table as _write
from rtsearch.io.spectra import count_spectra, read_spectra
from rtsearch.scoring.backend import Backend
from rtsearch.scoring.database.engine import Engine
from rtsearch.search.table import PsmTable
from rtsearch.types import Spectrum

log = logging.getLogger(__name__)


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
    runs: Sequence[str | Path],
    index: PeptideIndex,
    cfg: SearchConfig,
    backend: Backend,
    *,
    batch_size: int = 1024,
    progress: Callable[[int, int | None], None] | None = None,
) -> tuple[PsmTable, SearchSummary]:
    """Search every MS2 spectrum of ``runs``; q-values are computed per run."""
    t0 = time.perf_counter()
    engine = Engine(index, cfg, backend)
    table = PsmTable(index, primary=cfg.score)
    for batch in spectrum_batches(runs, batch_size=batch_size, default_charges=cfg.charges, progress=progress):
        table.add(engine.score(batch))
    table.finalize()
    summary = summarize(table, time.perf_counter() - t0)
    return table, summary


def spectrum_batches(
    runs: Sequence[str | Path], *, batch_size: int, default_charges: tuple[int, ...] = (),
    progress: Callable[[int, int | None], None] | None = None,
) -> Iterator[list[Spectrum]]:  # fmt: skip
    """The MS2 spectra of ``runs`` in batches of ``batch_size`` (a batch never spans two runs).

    ``progress(done, total)`` is called once each batch has been processed by the caller
    (``total`` is ``None`` when a file's spectra cannot be counted up front).
    """
    expected = [count_spectra(r) for r in runs]
    grand = sum(e for e in expected if e) if all(expected) else None
    done = 0
    for run in runs:
        batch: list[Spectrum] = []
        for sp in read_spectra(run, default_charges=default_charges):
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


def summarize(table: PsmTable, seconds: float) -> SearchSummary:
    """Counts at 1 % FDR from a finalized table (from its arrays: no rows are built)."""
    psms, peptides = table.counts_at(0.01)
    return SearchSummary(len(table), psms, peptides, seconds)


def write_table(table: PsmTable, out: str | Path) -> int:
    return _write(table, out)
