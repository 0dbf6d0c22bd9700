"""Spectrum preprocessing: pure functions on padded peak arrays.

Every function takes the array module ``xp`` (NumPy or CuPy) so one
definition runs on both backends; the NumPy run is the reference.

A batch of spectra is packed into ``[S, P]`` arrays padded on the right:
m/z with ``+inf``, intensity with ``0``. After `preprocess`, rows hold the
``top_peaks`` most intense peaks (ascending m/z), intensities square-rooted
and scaled to a maximum of 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.types import C13_DELTA


@dataclass
class PeakBatch:
    """Peaks of S spectra, padded to a common width P."""

    mz: Any  # float64 [S, P], +inf padding
    intensity: Any  # float32 [S, P], 0 padding
    n_peaks: Any  # int32 [S]
    precursor_mz: Any  # float64 [S]

    def __len__(self) -> int:
        return int(self.mz.shape[0])


@dataclass
class FlatPeaks:
    """Peaks of S spectra concatenated (host arrays), before padding."""

    mz: np.ndarray  # float64 [total]
    intensity: np.ndarray  # float32 [total]
    lengths: np.ndarray  # int64 [S]
    precursor_mz: np.ndarray  # float64 [S]


def pack(batch: SpectraBatch, *, max_width: int = 4096) -> FlatPeaks:
    """The batch's peaks, at most ``max_width`` (the most intense) of each spectrum.

    Spectra with more peaks than ``max_width`` keep their most intense ones, so
    one noisy spectrum cannot blow up the batch width.
    """
    lengths, mz, inten = batch.lengths, batch.mz, batch.intensity
    wide = np.flatnonzero(lengths > max_width)
    if wide.size:  # rare: the least intense peaks of each wide spectrum are dropped
        keep = np.ones(mz.shape[0], dtype=bool)
        for i in wide.tolist():
            a, b = int(batch.offsets[i]), int(batch.offsets[i + 1])
            keep[a + np.argpartition(inten[a:b], -max_width)[:-max_width]] = False
        mz, inten, lengths = mz[keep], inten[keep], np.minimum(lengths, max_width)
    return FlatPeaks(mz.astype(np.float64, copy=False), inten.astype(np.float32, copy=False),
                     lengths.astype(np.int64, copy=False), batch.precursor_mz)  # fmt: skip


def pad(flat: FlatPeaks, xp: Any, to_device: Callable[[np.ndarray], Any] | None = None) -> PeakBatch:
    """Scatter concatenated peaks into ``[S, P]`` arrays on ``xp``'s device.

    ``to_device`` moves the peak arrays (the bulk of the bytes); default ``xp.asarray``.
    """
    move = to_device or xp.asarray
    s = int(flat.lengths.shape[0])
    width = max(int(flat.lengths.max()) if s else 0, 1)
    lengths = xp.asarray(flat.lengths)
    mz = xp.full((s, width), xp.inf, dtype=xp.float64)
    inten = xp.zeros((s, width), dtype=xp.float32)
    total = int(flat.mz.shape[0])
    if total:
        rows = xp.repeat(xp.arange(s), lengths)
        cols = xp.arange(total) - xp.repeat(xp.cumsum(lengths) - lengths, lengths)
        mz[rows, cols] = move(flat.mz)
        inten[rows, cols] = move(flat.intensity)
    return PeakBatch(mz, inten, lengths.astype(xp.int32), xp.asarray(flat.precursor_mz))


def filter_peaks(batch: PeakBatch, *, min_mz: float, precursor_removal_da: float, xp: Any) -> Any:
    """Mask of peaks kept: above ``min_mz``, outside the precursor window, positive, finite."""
    mz, inten = batch.mz, batch.intensity
    near_prec = xp.abs(mz - batch.precursor_mz[:, None]) <= precursor_removal_da
    return (mz >= min_mz) & ~near_prec & (inten > 0) & xp.isfinite(mz)


def top_n(batch: PeakBatch, keep: Any, n: int, xp: Any) -> PeakBatch:
    """Keep the ``n`` most intense kept peaks of each row, re-sorted by m/z.

    Ties in intensity keep the lower m/z (stable sort), identically on both backends.
    """
    s, p = batch.mz.shape
    width = min(n, p)
    score = xp.where(keep, batch.intensity, xp.float32(-1.0))
    order = xp.argsort(-score, axis=1, kind="stable")[:, :width]
    rows = xp.arange(s)[:, None]
    chosen = score[rows, order] > 0
    mz = xp.where(chosen, batch.mz[rows, order], xp.inf)
    inten = xp.where(chosen, batch.intensity[rows, order], xp.float32(0.0))
    by_mz = xp.argsort(mz, axis=1, kind="stable")
    mz = mz[rows, by_mz]
    inten = inten[rows, by_mz]
    return PeakBatch(mz, inten, chosen.sum(axis=1).astype(xp.int32), batch.precursor_mz)


_ROW_SPAN = 1.0e5  # m/z offset between rows when all rows are searched at once


def isotope_peaks(batch: PeakBatch, keep: Any, tolerance_da: float, xp: Any) -> Any:
    """Mask of peaks that are a 13C isotope of a more intense kept peak (charge 1 or 2).

    A peak at m is an isotope when a kept peak at m − 1.00336/z (z = 1, 2) lies
    within ``tolerance_da`` and is more intense. Meant for high-resolution
    spectra, where isotope peaks are resolved and would take top-N places.
    """
    s, p = batch.mz.shape
    offset = xp.arange(s, dtype=xp.float64)[:, None] * _ROW_SPAN
    kept_mz = xp.where(keep & xp.isfinite(batch.mz), batch.mz, _ROW_SPAN - 1.0) + offset
    flat = kept_mz.ravel()
    order = xp.argsort(flat, kind="stable")
    flat_sorted = flat[order]
    inten = xp.where(keep, batch.intensity, 0).ravel()[order]
    out = xp.zeros((s, p), dtype=bool)
    for z in (1, 2):
        target = batch.mz + offset - C13_DELTA / z
        lo = xp.searchsorted(flat_sorted, (target - tolerance_da).ravel(), side="left")
        hi = xp.searchsorted(flat_sorted, (target + tolerance_da).ravel(), side="right")
        # the most intense kept peak in the window (windows hold one or two peaks at high resolution)
        best = xp.zeros(lo.shape, dtype=xp.float32)
        for step in range(3):
            j = lo + step
            live = j < hi
            best = xp.maximum(best, xp.where(live, inten[xp.minimum(j, flat_sorted.shape[0] - 1)], 0))
        out |= (best.reshape(s, p) > batch.intensity) & keep
    return out


def transform_intensity(batch: PeakBatch, xp: Any) -> PeakBatch:
    """Square root, then scale each row to a maximum of 1 (rows of zeros stay zero)."""
    root = xp.sqrt(batch.intensity)
    top = root.max(axis=1, keepdims=True)
    scaled = xp.where(top > 0, root / xp.where(top > 0, top, 1), 0).astype(xp.float32)
    return PeakBatch(batch.mz, scaled, batch.n_peaks, batch.precursor_mz)


def preprocess(
    batch: PeakBatch,
    *,
    top_peaks: int,
    min_mz: float,
    precursor_removal_da: float,
    xp: Any,
    deisotope_da: float = 0.0,
) -> PeakBatch:
    """Filter, drop isotope peaks (when ``deisotope_da`` > 0), keep the top peaks, transform."""
    keep = filter_peaks(batch, min_mz=min_mz, precursor_removal_da=precursor_removal_da, xp=xp)
    if deisotope_da > 0:
        keep &= ~isotope_peaks(batch, keep, deisotope_da, xp)
    return transform_intensity(top_n(batch, keep, top_peaks, xp), xp)
