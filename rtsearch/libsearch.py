"""Offline spectral library search: spectrum files → library scores → discriminant → q-values → rows.

Every MS2 spectrum is scored against the library entries within the precursor
tolerance (`rtsearch.scoring.library`); per run, a linear discriminant over the
library features (starting from SpectraST's F-value, as Percolator starts from
its best single feature) ranks the top hits, and target-decoy q-values follow
(`rtsearch.fdr`). Rows carry the offline search's columns (database-only
features empty) plus ``library_id``, ``dot``, ``dot_bias``, ``delta_dot`` and
``f_value``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch.backend import Backend
from rtsearch.fdr import count_at, peptide_q_values, q_values
from rtsearch.index.library import SpectralLibrary
from rtsearch.offline import SearchSummary, spectrum_batches
from rtsearch.psms import COLUMNS
from rtsearch.scoring.lda import fit
from rtsearch.scoring.library import LibraryMatches, LibraryMode, score_library
from rtsearch.types import Spectrum, Tolerance

LIBRARY_COLUMNS = ("library_id", "dot", "dot_bias", "delta_dot", "f_value")
# "dot" and "log_candidates" are database-search features too: the library's fill them, not a second column
OUTPUT_COLUMNS: tuple[str, ...] = COLUMNS + tuple(c for c in LIBRARY_COLUMNS if c not in COLUMNS)
FEATURES = ("f_value", "dot", "delta_dot", "dot_bias", "abs_ppm_error", "log_candidates", "matched_peaks")


class LibraryScorer:
    """Scores batches against one library on one backend: `GpuLibrary` on CuPy, `score_library` otherwise."""

    def __init__(self, lib: SpectralLibrary, backend: Backend | None = None) -> None:
        self.lib = lib
        self.backend = backend
        self._gpu: Any = None
        if backend is not None and backend.is_gpu:
            from rtsearch.scoring.library_gpu import GpuLibrary

            self._gpu = GpuLibrary(lib, backend.xp)

    def score(
        self, spectra: Sequence[Spectrum], tolerance: Tolerance, *, isotope_errors: Sequence[int] = (0,),
        mode: LibraryMode = "auto",
    ) -> LibraryMatches:  # fmt: skip
        """Best entry and scores of each spectrum (``mode`` chooses the GPU path; NumPy has one)."""
        if self._gpu is not None:
            return self._gpu.score(spectra, tolerance, isotope_errors=isotope_errors, mode=mode)
        return score_library(self.lib, spectra, tolerance, isotope_errors=isotope_errors)

    def device_bytes(self) -> int:
        """Bytes of library data on the device (0 on NumPy)."""
        return sum(self._gpu.device_bytes().values()) if self._gpu is not None else 0


def search_library_runs(
    runs: Sequence[str | Path], lib: SpectralLibrary, tolerance: Tolerance, *, batch_size: int = 1024,
    isotope_errors: Sequence[int] = (0,), progress: Callable[[int, int | None], None] | None = None,
    backend: Backend | None = None, mode: LibraryMode = "auto",
) -> tuple[dict[str, Any], SearchSummary]:  # fmt: skip
    """Search every MS2 spectrum of ``runs`` against ``lib``; the result columns and a summary."""
    t0 = time.perf_counter()
    scorer = LibraryScorer(lib, backend)
    spectra: list[Spectrum] = []
    parts = []
    for batch in spectrum_batches(runs, batch_size=batch_size, progress=progress):
        parts.append(scorer.score(batch, tolerance, isotope_errors=isotope_errors, mode=mode))
        spectra += batch
    cols = _columns(lib, spectra, parts)
    scored = np.asarray(cols["library_id"]) >= 0
    q, decoy = np.asarray(cols["q_value"]), np.asarray(cols["is_decoy"])
    psms = count_at(np.where(scored, q, 1.0), decoy)
    pq = np.asarray(cols["peptide_q_value"])
    ok = scored & (pq <= 0.01) & ~decoy
    peptides = len({cols["peptide"][i] for i in np.flatnonzero(ok)})
    return cols, SearchSummary(len(spectra), psms, peptides, time.perf_counter() - t0)


def _columns(lib: SpectralLibrary, spectra: list[Spectrum], parts: list[LibraryMatches]) -> dict[str, Any]:
    fields = LibraryMatches.__dataclass_fields__
    m = LibraryMatches(*(np.concatenate([getattr(p, f) for p in parts]) if parts else np.zeros(0) for f in fields))
    entry = m.entry.astype(np.int64)
    hit = entry >= 0
    e = np.where(hit, entry, 0)
    n = len(spectra)
    prec = np.array([s.precursor_mz for s in spectra], dtype=np.float64)
    calc = np.where(hit, lib.precursor_mz[e], np.nan)
    ppm = (prec - calc) / calc * 1e6
    decoy = hit & lib.is_decoy[e]
    feats = np.column_stack([m.f_value, m.dot, m.delta_dot, m.dot_bias, np.abs(ppm), np.log1p(m.candidates),
                             m.matched_peaks]).reshape(n, len(FEATURES))  # fmt: skip
    runs = np.array([s.run for s in spectra], dtype=object)
    score = np.full(n, np.nan)
    for run in dict.fromkeys(runs.tolist()):
        rows = np.flatnonzero((runs == run) & hit)
        if rows.size:
            x = np.nan_to_num(feats[rows], nan=0.0)
            score[rows] = fit(x, decoy[rows], FEATURES, start="f_value").score(x)
    peptide = [lib.peptides[i] if h else "" for i, h in zip(e.tolist(), hit.tolist(), strict=True)]
    pq = peptide_q_values(score, decoy, np.array([p or "-" for p in peptide], dtype=object))
    only_hits = lambda a: np.where(hit, a, np.nan)  # noqa: E731
    cols: dict[str, Any] = dict.fromkeys(COLUMNS, np.full(n, np.nan))  # database-only features: empty
    cols.update({
        "run": runs.tolist(), "scan": np.array([s.scan for s in spectra], np.int64),
        "charge": np.where(hit, lib.charge[e], 0).astype(np.int64), "precursor_mz": prec, "calc_mz": calc,
        "ppm_error": ppm, "peptide": peptide,
        "proteins": [lib.proteins[i] if h else "" for i, h in zip(e.tolist(), hit.tolist(), strict=True)],
        "is_decoy": decoy, "score": score, "q_value": only_hits(q_values(score, decoy)),
        "peptide_q_value": only_hits(pq), "matched_peaks": np.where(hit, m.matched_peaks, 0).astype(np.int64),
        "reason": ["" if h else (s.problem or "no library entry within the precursor tolerance")
                   for s, h in zip(spectra, hit.tolist(), strict=True)],
        "library_id": entry, "dot": only_hits(m.dot), "dot_bias": only_hits(m.dot_bias),
        "delta_dot": only_hits(m.delta_dot), "f_value": only_hits(m.f_value),
        "log_candidates": only_hits(feats[:, FEATURES.index("log_candidates")]),
    })  # fmt: skip
    return cols
