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

from rtsearch.fdr import count_at, peptide_q_values, q_values
from rtsearch.index.library import SpectralLibrary
from rtsearch.offline import SearchSummary
from rtsearch.psms import COLUMNS
from rtsearch.readers import count_spectra, read_spectra
from rtsearch.scoring.lda import fit
from rtsearch.scoring.library import score_library
from rtsearch.types import Spectrum, Tolerance

LIBRARY_COLUMNS = ("library_id", "dot", "dot_bias", "delta_dot", "f_value")
# "dot" and "log_candidates" are database-search features too: the library's fill them, not a second column
OUTPUT_COLUMNS: tuple[str, ...] = COLUMNS + tuple(c for c in LIBRARY_COLUMNS if c not in COLUMNS)
FEATURES = ("f_value", "dot", "delta_dot", "dot_bias", "abs_ppm_error", "log_candidates", "matched_peaks")


def search_library_runs(
    runs: Sequence[str | Path], lib: SpectralLibrary, tolerance: Tolerance, *, batch_size: int = 1024,
    isotope_errors: Sequence[int] = (0,), progress: Callable[[int, int | None], None] | None = None,
) -> tuple[dict[str, Any], SearchSummary]:  # fmt: skip
    """Search every MS2 spectrum of ``runs`` against ``lib``; the result columns and a summary."""
    t0 = time.perf_counter()
    expected = [count_spectra(r) for r in runs]
    grand = sum(e for e in expected if e) if all(expected) else None
    spectra: list[Spectrum] = []
    parts = []
    for run in runs:
        batch: list[Spectrum] = []
        for sp in read_spectra(run, default_charges=()):
            batch.append(sp)
            if len(batch) >= batch_size:
                parts.append(score_library(lib, batch, tolerance, isotope_errors=isotope_errors))
                spectra += batch
                batch = []
                if progress:
                    progress(len(spectra), grand)
        if batch:
            parts.append(score_library(lib, batch, tolerance, isotope_errors=isotope_errors))
            spectra += batch
            if progress:
                progress(len(spectra), grand)
    cols = _columns(lib, spectra, parts)
    scored = np.asarray(cols["library_id"]) >= 0
    q, decoy = np.asarray(cols["q_value"]), np.asarray(cols["is_decoy"])
    psms = count_at(np.where(scored, q, 1.0), decoy)
    pq = np.asarray(cols["peptide_q_value"])
    ok = scored & (pq <= 0.01) & ~decoy
    peptides = len({cols["peptide"][i] for i in np.flatnonzero(ok)})
    return cols, SearchSummary(len(spectra), psms, peptides, time.perf_counter() - t0)


def _columns(lib: SpectralLibrary, spectra: list[Spectrum], parts: list[Any]) -> dict[str, Any]:
    n = len(spectra)
    cat = (lambda f: np.concatenate([getattr(p, f) for p in parts])) if parts else (lambda f: np.zeros(0))
    entry = cat("entry").astype(np.int64) if parts else np.zeros(0, np.int64)
    hit = entry >= 0
    e = np.where(hit, entry, 0)
    prec = np.array([s.precursor_mz for s in spectra])
    calc = np.where(hit, lib.precursor_mz[e] if n else np.zeros(0), np.nan)
    ppm = (prec - calc) / calc * 1e6
    decoy = np.where(hit, lib.is_decoy[e] if n else np.zeros(0, bool), False)
    feats = np.column_stack([cat("f_value"), cat("dot"), cat("delta_dot"), cat("dot_bias"), np.abs(ppm),
                             np.log1p(cat("candidates")), cat("matched_peaks")]) if n else np.zeros((0, 7))  # fmt: skip
    runs = np.array([s.run for s in spectra], dtype=object)
    score = np.full(n, np.nan)
    for run in dict.fromkeys(runs.tolist()):
        rows = np.flatnonzero((runs == run) & hit)
        if rows.size:
            x = np.nan_to_num(feats[rows], nan=0.0)
            score[rows] = fit(x, decoy[rows], FEATURES, start="f_value").score(x)
    q = q_values(score, decoy)
    peptide = [lib.peptides[i] if h else "" for i, h in zip(e.tolist(), hit.tolist(), strict=True)]
    pq = peptide_q_values(score, decoy, np.array([p or "-" for p in peptide], dtype=object))
    nan = np.full(n, np.nan)
    cols: dict[str, Any] = {c: nan for c in COLUMNS}
    cols.update({
        "run": [s.run for s in spectra], "scan": np.array([s.scan for s in spectra], np.int64),
        "charge": np.where(hit, lib.charge[e] if n else np.zeros(0), 0).astype(np.int64), "precursor_mz": prec,
        "calc_mz": calc, "ppm_error": ppm, "peptide": peptide,
        "proteins": [lib.proteins[i] if h else "" for i, h in zip(e.tolist(), hit.tolist(), strict=True)],
        "is_decoy": decoy, "score": score, "q_value": np.where(hit, q, np.nan),
        "peptide_q_value": np.where(hit, pq, np.nan),
        "matched_peaks": np.where(hit, cat("matched_peaks") if n else np.zeros(0), 0).astype(np.int64),
        "reason": ["" if h else (s.problem or "no library entry within the precursor tolerance")
                   for s, h in zip(spectra, hit.tolist(), strict=True)],
        "library_id": entry, "dot": np.where(hit, cat("dot") if n else nan, np.nan),
        "dot_bias": np.where(hit, cat("dot_bias") if n else nan, np.nan),
        "delta_dot": np.where(hit, cat("delta_dot") if n else nan, np.nan),
        "f_value": np.where(hit, cat("f_value") if n else nan, np.nan),
        "log_candidates": np.where(hit, feats[:, FEATURES.index("log_candidates")] if n else nan, np.nan),
    })  # fmt: skip
    return cols
