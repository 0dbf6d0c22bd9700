"""Offline spectral library search: spectrum files → `LibraryEngine` → `LibraryTable` → rows.

The same engine and table the daemon uses with ``rtsearch serve --library``, so a
result offline is the result online.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rtsearch.library.store import SpectralLibrary
from rtsearch.scoring.backend import Backend
from rtsearch.scoring.library.scores import LibraryMode
from rtsearch.search.library import LibraryEngine
from rtsearch.search.libtable import LibraryTable
from rtsearch.search.offline import SearchSummary, spectrum_batches
from rtsearch.types import Tolerance


def search_library_runs(
    runs: Sequence[str | Path], lib: SpectralLibrary, tolerance: Tolerance, *, batch_size: int = 1024,
    isotope_errors: Sequence[int] = (0,), progress: Callable[[int, int | None], None] | None = None,
    backend: Backend | None = None, mode: LibraryMode = "auto",
) -> tuple[dict[str, Any], SearchSummary]:  # fmt: skip
    """Search every MS2 spectrum of ``runs`` against ``lib``; the result columns and a summary."""
    t0 = time.perf_counter()
    engine = LibraryEngine(lib, tolerance, backend, isotope_errors=isotope_errors, mode=mode)
    table = LibraryTable(lib)
    for batch in spectrum_batches(runs, batch_size=batch_size, progress=progress):
        table.add(engine.score(batch))
    table.finalize()
    psms, peptides = table.counts_at(0.01)
    return table.columns(), SearchSummary(len(table), psms, peptides, time.perf_counter() - t0)
