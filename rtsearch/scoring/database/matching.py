"""Full scoring of candidates: theoretical b/y ions matched to the peaks (NumPy reference).

For each (query, candidate) pair, every b and y ion at fragment charges
1 .. min(max(z - 1, 1), max_fragment_charge) is matched to the *most intense* peak
(ties to the lower m/z) within the fragment tolerance. From the matches:

- ``n_b``, ``n_y``: matched b and y ions;
- ``summed``: summed intensity of the matched ions' peaks;
- ``matched_peaks``: distinct peaks matched;
- ``explained``: intensity of those distinct peaks over the spectrum's total;
- ``longest_run``: longest run of consecutive b (or y) positions matched;
- ``frag_error``: mean |peak m/z − ion m/z| of the matched ions, as a fraction
  of the tolerance (chance matches spread over the window, right ones do not);
- ``hyperscore`` = ln(n_b!) + ln(n_y!) + ln(1 + 100·Σb) + ln(1 + 100·Σy), Σb and
  Σy the matched b and y intensities (X!Tandem's score, Fenyö & Beavis 2003, with
  the b and y sums in separate logarithms as Sage computes it);
- ``xcorr``: Σ over ions of (matched intensity − mean intensity of the
  ±75 Da around the ion, as 150 unit bins): the background-subtracted
  cross-correlation of SEQUEST/Comet (Eng et al. 2008, J. Proteome Res.
  7:4598 "fast XCorr"), computed sparsely on the preprocessed peaks;
- ``dot``: cosine between the peaks (as preprocessed) and a theoretical
  spectrum of unit-intensity ions — the spectral dot product (SDP) of
  Li et al. 2014, BMC Bioinformatics 15:121.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import lgamma
from typing import Any

import numpy as np

from rtsearch.database.fragments import residue_masses
from rtsearch.database.index import PeptideIndex
from rtsearch.types import H2O, PROTON, Tolerance

_ROW_SPAN = 1.0e5  # m/z offset between rows when all peaks are searched at once
_LGAMMA = np.array([lgamma(n + 1.0) for n in range(1024)])

XCORR_HALF_WINDOW = 75.0  # Da each side; the background is its summed intensity / 150
STATS = (
    "hyperscore", "dot", "xcorr", "n_b", "n_y", "summed", "matched_peaks", "explained", "longest_run", "frag_error",
)  # fmt: skip


@dataclass
class MatchStats:
    """Per-pair results, each an array of shape [Q, K] (NaN/0 where no candidate)."""

    hyperscore: Any
    dot: Any
    xcorr: Any
    n_b: Any
    n_y: Any
    summed: Any
    matched_peaks: Any
    explained: Any
    longest_run: Any
    frag_error: Any


def hyperscore(n_b: Any, n_y: Any, summed_b: Any, summed_y: Any, xp: Any = np) -> Any:
    """ln(n_b!) + ln(n_y!) + ln(1 + 100 · Σb) + ln(1 + 100 · Σy)."""
    table = xp.asarray(_LGAMMA)
    lg = table[xp.minimum(n_b, 1023)] + table[xp.minimum(n_y, 1023)]
    return lg + xp.log1p(100.0 * summed_b) + xp.log1p(100.0 * summed_y)


def fragment_charges(charge: np.ndarray, max_fragment_charge: int) -> np.ndarray:
    """Highest fragment charge tried for each precursor charge."""
    return np.clip(charge - 1, 1, max_fragment_charge)


def match_numpy(
    index: PeptideIndex,
    peaks_mz: np.ndarray,
    peaks_int: np.ndarray,
    n_peaks: np.ndarray,
    q_spectrum: np.ndarray,
    q_charge: np.ndarray,
    cand: np.ndarray,
    tolerance: Tolerance,
    max_fragment_charge: int,
) -> MatchStats:
    """Score every candidate ``cand[q, k]`` (``-1`` = none) of every query."""
    n_q, k = cand.shape
    peaks_int = np.asarray(peaks_int, dtype=np.float64)  # accumulate in float64, like the GPU kernel
    valid = cand >= 0
    pq, pk = np.nonzero(valid)
    peps = cand[pq, pk]
    out = {name: np.zeros((n_q, k), dtype=np.float64) for name in STATS}
    out["hyperscore"][:] = -np.inf
    out["dot"][:] = -np.inf
    out["xcorr"][:] = -np.inf
    if peps.size == 0:
        return MatchStats(**out)
    masses, offsets = residue_masses(index.bases, index.forms.take(peps), index.residue_mass, index.mods)
    lengths = np.diff(offsets)
    lmax = int(lengths.max())
    n = peps.shape[0]
    # padded residue masses [n, lmax]; prefix sums give b ions
    col = np.arange(lmax)
    resid = np.zeros((n, lmax))
    mask = col[None, :] < lengths[:, None]
    resid[mask] = masses
    prefix = np.cumsum(resid, axis=1)[:, :-1]  # b(i+1) neutral, i = 0..lmax-2
    total = prefix[np.arange(n), lengths - 2] + resid[np.arange(n), lengths - 1]
    ion_ok = col[None, : lmax - 1] < (lengths - 1)[:, None]
    b_neutral = prefix
    # y(j) for j = 1..L-1 = total - b(L-j): position j-1 holds y(j)
    rev = np.clip((lengths - 1)[:, None] - 1 - col[None, : lmax - 1], 0, lmax - 2)
    y_neutral = total[:, None] - np.take_along_axis(prefix, rev, axis=1) + H2O
    zmax = fragment_charges(q_charge[pq], max_fragment_charge)
    spec = q_spectrum[pq]
    row_offset = np.arange(peaks_mz.shape[0])[:, None] * _ROW_SPAN
    flat = np.where(np.isfinite(peaks_mz), peaks_mz, _ROW_SPAN - 1.0) + row_offset
    flat = flat.ravel()
    flat_int = peaks_int.ravel()
    width = peaks_mz.shape[1]
    # intensity summed along each spectrum's own row (not the batch's: a spectrum's xcorr must not depend on
    # which spectra share its batch), read at flat positions as ``cum_row[spectrum, position + 1]``
    cum_row = np.zeros((peaks_mz.shape[0], width + 1))
    np.cumsum(peaks_int, axis=1, dtype=np.float64, out=cum_row[:, 1:])
    xcorr = np.zeros(n)
    err_sum = np.zeros(n)
    n_matched = np.zeros(n)
    hit_b = np.zeros((n, lmax - 1), dtype=bool)
    hit_y = np.zeros((n, lmax - 1), dtype=bool)
    summed = np.zeros(n)
    dot_num = np.zeros(n)
    n_theo = np.zeros(n)
    used = np.zeros((n, width), dtype=bool)
    summed_b = np.zeros(n)
    summed_y = np.zeros(n)
    for neutral, hits, series_sum in ((b_neutral, hit_b, summed_b), (y_neutral, hit_y, summed_y)):
        for c in range(1, max_fragment_charge + 1):
            on = ion_ok & (zmax >= c)[:, None]
            mz = (neutral + c * PROTON) / c
            key = mz + spec[:, None] * _ROW_SPAN
            peak, ok = _most_intense(flat, flat_int, key, spec, n_peaks, width, mz, tolerance)
            ok &= on
            n_theo += on.sum(axis=1)
            hits |= ok
            inten = np.where(ok, peaks_int[spec[:, None], np.where(ok, peak, 0)], 0.0)
            err = np.abs(peaks_mz[spec[:, None], np.where(ok, peak, 0)] - mz) / tolerance.width(mz)
            err_sum += np.where(ok, err, 0.0).sum(axis=1)
            n_matched += ok.sum(axis=1)
            summed += inten.sum(axis=1)
            series_sum += inten.sum(axis=1)
            dot_num += inten.sum(axis=1)
            key_c = mz + spec[:, None] * _ROW_SPAN
            lo = np.searchsorted(flat, (key_c - XCORR_HALF_WINDOW).ravel(), side="left").reshape(mz.shape)
            hi = np.searchsorted(flat, (key_c + XCORR_HALF_WINDOW).ravel(), side="right").reshape(mz.shape)
            hi = np.minimum(hi, (spec * width + n_peaks[spec])[:, None])
            lo = np.minimum(lo, hi)
            base, row = (spec * width)[:, None], spec[:, None]
            span = cum_row[row, np.clip(hi - base, 0, width)] - cum_row[row, np.clip(lo - base, 0, width)]
            background = (span - inten) / (2 * XCORR_HALF_WINDOW)
            xcorr += np.where(on, inten - background, 0.0).sum(axis=1)
            r, c_ = np.nonzero(ok)
            used[r, peak[r, c_]] = True
    n_b = hit_b.sum(axis=1)
    n_y = hit_y.sum(axis=1)
    peak_int = peaks_int[spec].astype(np.float64)
    explained = (used * peak_int).sum(axis=1) / np.maximum(peak_int.sum(axis=1), 1e-12)
    norm = np.sqrt((peak_int**2).sum(axis=1)) * np.sqrt(np.maximum(n_theo, 1))
    dot = dot_num / np.maximum(norm, 1e-12)
    run = np.maximum(_longest_run(hit_b), _longest_run(hit_y))
    vals = {
        "hyperscore": hyperscore(n_b, n_y, summed_b, summed_y), "dot": dot, "xcorr": xcorr,
        "n_b": n_b, "n_y": n_y, "summed": summed,
        "matched_peaks": used.sum(axis=1), "explained": explained, "longest_run": run,
        "frag_error": np.where(n_matched > 0, err_sum / np.maximum(n_matched, 1), 1.0),
    }  # fmt: skip
    for name, v in vals.items():
        out[name][pq, pk] = v
    return MatchStats(**out)


def _most_intense(
    flat: np.ndarray,
    flat_int: np.ndarray,
    key: np.ndarray,
    spec: np.ndarray,
    n_peaks: np.ndarray,
    width: int,
    mz: np.ndarray,
    tolerance: Tolerance,
) -> tuple[np.ndarray, np.ndarray]:
    """Index (within its row) of the most intense real peak within tolerance of each ion.

    Ties go to the lower m/z. ``ok`` is False where no peak is in tolerance.
    """
    tol = np.asarray(tolerance.width(mz))
    row_start = spec[:, None] * width
    first = np.searchsorted(flat, (key - tol).ravel(), side="left").reshape(key.shape)
    last = np.searchsorted(flat, (key + tol).ravel(), side="right").reshape(key.shape)
    last = np.minimum(last, row_start + n_peaks[spec][:, None])
    best = np.full(key.shape, -1, dtype=np.int64)
    best_int = np.full(key.shape, -1.0)
    j = first.copy()
    while True:
        live = j < last
        if not live.any():
            break
        jj = np.where(live, j, 0)
        inten = np.where(live, flat_int[jj], -1.0)
        better = live & (inten > best_int)
        best = np.where(better, jj, best)
        best_int = np.where(better, inten, best_int)
        j = j + 1
    ok = best >= 0
    return np.where(ok, best - row_start, 0), ok


def _longest_run(hits: np.ndarray) -> np.ndarray:
    """Longest run of True along axis 1."""
    best = np.zeros(hits.shape[0], dtype=np.int64)
    cur = np.zeros(hits.shape[0], dtype=np.int64)
    for i in range(hits.shape[1]):
        cur = np.where(hits[:, i], cur + 1, 0)
        best = np.maximum(best, cur)
    return best
