"""Spectral library scoring: SpectraST's dot, dot bias, delta dot and F-value (NumPy reference).

Lam et al. 2007, Proteomics 7:655 (SpectraST); the F-value as SpectraST computes
it (``SpectraSTSimScores::calcFval`` with its default delta fraction 0.4). A query
is preprocessed exactly like the library (`rtsearch.library.store.preprocess_peaks`)
into a dense vector over m/z bins; every library entry whose precursor m/z lies
within the tolerance (and whose charge matches, when the query's is known) is a
candidate, and because the store is sorted by precursor m/z the candidates' peaks
are one contiguous slice, scored with one gather and one segmented sum:

    dot      = sum_i q[b_i] * l_i                       (both unit length: a cosine)
    dot_bias = sqrt(sum_i (q[b_i] * l_i)^2) / dot       (1: one peak carries the dot)
    delta    = dot_1 - dot_2   (second best: the best candidate of another sequence, `SpectralLibrary.sequence`)
    F        = 0.6 * dot + 0.4 * min(delta / dot, 2 * dot)   (0.8 * dot with fewer than 20 candidates)
               minus the dot-bias penalty: 0.12 below 0.09; (DB - 0.32) * 4 up to 0.35;
               0.12 + (DB - 0.35) * 1.2 up to 0.45; 0.24 above; F <= 0 becomes -1e-5

The GPU path (a kernel over a whole batch) must reproduce these numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rtsearch.library.store import LibraryParams, SpectralLibrary, preprocess_peaks
from rtsearch.types import Spectrum, Tolerance

FRACTION_DELTA = 0.4  # SpectraST's default fvalFractionDelta
FEW_CANDIDATES = 20  # fewer candidates than this: F from the dot alone
C13 = 1.0033548  # Da between isotope peaks



@dataclass
class LibraryMatches:
    """Per query spectrum: the best entry (``-1`` none) and its scores."""

    entry: np.ndarray  # int64 [S], index into the library
    dot: np.ndarray  # float64 [S]
    dot_bias: np.ndarray
    delta_dot: np.ndarray
    f_value: np.ndarray
    candidates: np.ndarray  # int64 [S]
    matched_peaks: np.ndarray  # int64 [S]: bins the best entry shares with the query


@dataclass
class LibraryQueries:
    """A batch's precursor windows against one library, as arrays (what the GPU kernels take).

    Entries ``a[s]:b[s]`` lie in spectrum ``s``'s window (widened by the isotope errors);
    with ``iso`` set, an entry must also be within ``width[s]`` of ``precursor - k * C13 / z``
    for some ``k`` in ``iso`` (``z``: the entry's charge; with ``by_mass``, the distance in m/z
    times ``z``: a Da tolerance bounds the mass). ``zmask[s]`` has bit ``z`` set for each
    precursor charge ``z`` to try (0: any charge; charges above 62 share bit 63). Unscorable
    spectra (MS1, no precursor) have an empty window.
    """

    precursor_mz: np.ndarray  # float64 [S]
    width: np.ndarray  # float64 [S]: the tolerance in m/z
    a: np.ndarray  # int64 [S]
    b: np.ndarray  # int64 [S]
    zmask: np.ndarray  # uint64 [S]
    iso: np.ndarray  # int32 [k]; empty when the range is the window (isotope error 0, a ppm tolerance)
    by_mass: bool  # a Da tolerance: on the mass, |precursor m/z - entry m/z| * z


def library_queries(
    lib: SpectralLibrary, spectra: Sequence[Spectrum], tolerance: Tolerance, isotope_errors: Sequence[int] = (0,)
) -> LibraryQueries:
    """Each spectrum's window of ``lib`` (the ranges `score_library` searches, vectorized)."""
    iso = np.asarray(sorted(set(isotope_errors)), dtype=np.float64)
    n = len(spectra)
    prec = np.fromiter((sp.precursor_mz for sp in spectra), dtype=np.float64, count=n)
    level = np.fromiter((sp.ms_level for sp in spectra), dtype=np.int64, count=n)
    ok = (level >= 2) & (prec > 0)
    width = np.asarray(tolerance.width(prec), dtype=np.float64) + np.zeros(n)
    lo, hi = prec - width, prec + width
    a = np.searchsorted(lib.precursor_mz, lo - max(iso.max(), 0.0) * C13, "left").astype(np.int64)
    b = np.searchsorted(lib.precursor_mz, hi - min(iso.min(), 0.0) * C13, "right").astype(np.int64)
    a, b = np.where(ok, a, 0), np.where(ok, np.maximum(a, b), 0)
    zmask = np.zeros(n, dtype=np.uint64)
    for s, sp in enumerate(spectra):
        for z in sp.charges:
            zmask[s] |= np.uint64(1) << np.uint64(min(max(int(z), 0), 63))
    by_mass = tolerance.unit == "Da"
    filtered = by_mass or iso.size > 1 or iso[0] != 0
    return LibraryQueries(prec, width, a, b, zmask, iso.astype(np.int32) if filtered else np.zeros(0, np.int32),
                          by_mass)  # fmt: skip


def f_value(dot: np.ndarray, delta: np.ndarray, dot_bias: np.ndarray, n_candidates: np.ndarray) -> np.ndarray:
    """SpectraST's F-value (see the module docstring), elementwise."""
    dot = np.asarray(dot, dtype=np.float64)
    safe = np.where(dot > 1e-5, dot, 1.0)
    norm_delta = np.minimum(np.asarray(delta) / safe, 2.0 * dot)
    f = (1 - FRACTION_DELTA) * dot + FRACTION_DELTA * norm_delta
    f = np.where((f > 0.1) & (np.asarray(n_candidates) < FEW_CANDIDATES), (1 - 0.5 * FRACTION_DELTA) * dot, f)
    db = np.asarray(dot_bias, dtype=np.float64)
    penalty = np.select(
        [db < 0.09, db <= 0.32, db <= 0.35, db <= 0.45],
        [0.12, 0.0, (db - 0.32) * 4.0, 0.12 + (db - 0.35) * 1.2],
        0.24,
    )
    f = np.where(db >= 1e-6, f - penalty, f)
    f = np.where(f <= 0.0, -1e-5, f)
    return np.where(dot < 1e-5, -1e-5, f)


def score_library(
    lib: SpectralLibrary, spectra: Sequence[Spectrum], tolerance: Tolerance, *, n_bins: int | None = None,
    isotope_errors: Sequence[int] = (0,),
) -> LibraryMatches:
    """Best library entry and SpectraST scores of each spectrum (NumPy; see the module docstring).

    ``isotope_errors``: the instrument may have picked the k-th isotope peak as the precursor, so
    an entry is a candidate when ``precursor - k * 1.00335 / charge`` (the entry's charge) is
    within the tolerance of its m/z for some k listed. A tolerance in Da bounds the mass: the
    m/z difference times the entry's charge (the m/z range searched is the charge-1 one).
    """
    iso = np.asarray(sorted(set(isotope_errors)), dtype=np.float64)
    by_mass = tolerance.unit == "Da"
    params: LibraryParams = lib.params
    n = len(spectra)
    out = LibraryMatches(np.full(n, -1, np.int64), np.zeros(n), np.zeros(n), np.zeros(n), np.full(n, -1e-5),
                         np.zeros(n, np.int64), np.zeros(n, np.int64))  # fmt: skip
    top_bin = int(lib.peak_bins.max()) + 1 if n_bins is None and lib.peak_bins.size else (n_bins or 1)
    dense = np.zeros(top_bin + 1, dtype=np.float64)
    sequence = lib.sequence
    for s, sp in enumerate(spectra):
        if sp.ms_level < 2 or not sp.precursor_mz > 0:
            continue
        lo, hi = tolerance.bounds(sp.precursor_mz)
        rng = lib.within(lo - max(iso.max(), 0.0) * C13, hi - min(iso.min(), 0.0) * C13)
        if not len(rng):
            continue
        ids = np.arange(rng.start, rng.stop)
        if by_mass or iso.size > 1 or iso[0] != 0:
            zz = np.maximum(lib.charge[ids], 1).astype(np.float64)[:, None]
            err = np.abs(sp.precursor_mz - iso[None, :] * C13 / zz - lib.precursor_mz[ids][:, None])
            if by_mass:
                err = err * zz
            ids = ids[(err <= float(tolerance.width(sp.precursor_mz))).any(axis=1)]
        if sp.charges:
            ids = ids[np.isin(lib.charge[ids], np.asarray(sp.charges))]
        if not ids.size:
            continue
        qb, qv = preprocess_peaks(sp.mz, sp.intensity, sp.precursor_mz, params)
        keep = qb < dense.size
        dense[qb[keep]] = qv[keep]
        starts, ends = lib.peak_offsets[ids], lib.peak_offsets[ids + 1]
        a, b = int(lib.peak_offsets[rng.start]), int(lib.peak_offsets[rng.stop])
        prod = np.minimum(lib.peak_bins[a:b], dense.size - 1)
        prod = dense[prod] * lib.peak_values[a:b]
        csum = np.r_[0.0, np.cumsum(prod)]
        csq = np.r_[0.0, np.cumsum(prod * prod)]
        cnt = np.r_[0, np.cumsum(prod > 0)]
        dots = csum[ends - a] - csum[starts - a]
        sq = np.maximum(csq[ends - a] - csq[starts - a], 0.0)
        dense[qb[keep]] = 0.0
        order = np.argsort(-dots, kind="stable")
        best = int(ids[order[0]])
        second = 0.0
        for k in order[1:]:
            if sequence[ids[k]] != sequence[best]:
                second = float(dots[k])
                break
        d = float(dots[order[0]])
        out.entry[s] = best
        out.dot[s] = d
        out.dot_bias[s] = float(np.sqrt(sq[order[0]])) / d if d > 0 else 0.0
        out.delta_dot[s] = d - second
        out.candidates[s] = ids.size
        out.matched_peaks[s] = int(cnt[ends[order[0]] - a] - cnt[starts[order[0]] - a])
    ok = out.entry >= 0
    out.f_value[ok] = f_value(out.dot[ok], out.delta_dot[ok], out.dot_bias[ok], out.candidates[ok])
    return out
