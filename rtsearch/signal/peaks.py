"""Chromatographic peaks of smoothed traces: apex, borders, area, FWHM, all traces at once.

A smoothed trace is cut at its local minima (and its ends) into peaks, each spanning one local maximum; a minimum
less than ``min_prominence`` × the lower of its two neighbouring apexes below that apex is no border (a
shoulder, not a peak of its own: its neighbours are one peak); peaks of fewer than ``min_points`` points
and peaks lower than ``min_height`` × their trace's highest (a smoother's ringing at a large peak's foot) are
dropped. Per peak: its apex (the highest smoothed point), the borders' times, its area (trapezoids of the
smoothed values over time, border to border) and its FWHM (where the smoothed curve crosses half the apex,
linearly between points; the border when it does not)::

    smoothed   ▁▂▅█▅▃▂▃▆▇▅▂▁
               |  peak  |peak |     borders at the local minima; apex, area, FWHM each
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtsearch.database.arrays import ranges


@dataclass
class Peaks:
    """Peaks of traces, one row each; ``start``/``apex``/``end`` are rows of the traces' table (inclusive)."""

    trace: np.ndarray  # int64
    start: np.ndarray
    apex: np.ndarray
    end: np.ndarray
    area: np.ndarray  # intensity × seconds
    fwhm: np.ndarray  # seconds

    def __len__(self) -> int:
        return int(self.trace.shape[0])


def find_peaks(rt: np.ndarray, y: np.ndarray, offsets: np.ndarray, *, min_points: int = 3,
               min_prominence: float = 0.1, min_height: float = 0.01, fwhm: bool = True) -> Peaks:  # fmt: skip
    """Peaks of the smoothed traces ``y`` (CSR: ``offsets``; see the module docstring); ``fwhm`` False leaves the
    widths NaN (a Python step a peak: live tracking does without)."""
    n = rt.shape[0]
    trace = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))
    first = np.zeros(n, bool)
    first[offsets[:-1][np.diff(offsets) > 0]] = True
    last = np.zeros(n, bool)
    last[offsets[1:][np.diff(offsets) > 0] - 1] = True
    prev = np.where(first, np.inf, np.r_[np.inf, y[:-1]])
    nxt = np.where(last, np.inf, np.r_[y[1:], np.inf])
    cut = (y <= prev) & (y < nxt) & ~first & ~last  # interior local minima (the first of a flat bottom)
    seg = _segments(first, last, cut)
    if seg.shape[0] and np.any(cut):  # shallow valleys are not borders: judged against their two neighbours' apexes
        top = np.maximum.reduceat(y, seg[:, 0])  # each segment's maximum (its end row is the next's start)
        top = np.maximum(top, y[seg[:, 1]])
        c = np.flatnonzero(cut)
        k = np.searchsorted(seg[:, 1], c)  # the segment ending at the cut; the next starts there
        lower = np.minimum(top[k], top[k + 1])
        cut[c[lower - y[c] < min_prominence * lower]] = False
        seg = _segments(first, last, cut)
    segments = seg
    start, end = segments[:, 0], segments[:, 1]
    keep = end - start + 1 >= min_points
    start, end = start[keep], end[keep]
    apex = _argmax_ranges(y, start, end)
    top = np.maximum.reduceat(y, offsets[:-1][np.diff(offsets) > 0])  # each (non-empty) trace's highest value
    high = y[apex] >= min_height * top[np.cumsum(np.diff(offsets) > 0)[trace[start]] - 1]
    start, apex, end = start[high], apex[high], end[high]
    area = _area(rt, y, start, end)
    width = _fwhm(rt, y, start, apex, end) if fwhm else np.full(start.shape[0], np.nan)
    return Peaks(trace[start], start, apex, end, area, width)


def _segments(first: np.ndarray, last: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """[start, end] rows of the pieces between consecutive borders (a cut ends one and starts the next)."""
    b = np.flatnonzero(first | cut | last)
    k = np.flatnonzero((first | cut)[b])
    end = np.where(last[b[k]], b[k], b[np.minimum(k + 1, b.shape[0] - 1)])  # a one-point trace: itself
    return np.stack([b[k], end], axis=1)


def _argmax_ranges(y: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The first highest row of each [start, end] (as ``argmax``), all ranges at once."""
    if start.shape[0] == 0:
        return start.copy()
    row, at = ranges(start, end + 1)
    first = np.r_[0, np.cumsum(end - start + 1)[:-1]]
    top = np.maximum.reduceat(y[at], first)
    return np.minimum.reduceat(np.where(y[at] == top[row], at, np.iinfo(np.int64).max), first)


def _area(rt: np.ndarray, y: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    trap = np.r_[(y[1:] + y[:-1]) * np.diff(rt) / 2.0, 0.0]  # row i: the trapezoid from i to i + 1
    csum = np.r_[0.0, np.cumsum(trap)]
    return csum[end] - csum[start]


def _fwhm(rt: np.ndarray, y: np.ndarray, start: np.ndarray, apex: np.ndarray, end: np.ndarray) -> np.ndarray:
    out = np.empty(start.shape[0])
    for k, (a, m, b) in enumerate(zip(start.tolist(), apex.tolist(), end.tolist(), strict=True)):
        half = y[m] / 2.0
        out[k] = _cross(rt, y, m, a, -1, half) - _cross(rt, y, m, b, 1, half)
    return np.abs(out)


def _cross(rt: np.ndarray, y: np.ndarray, m: int, stop: int, step: int, half: float) -> float:
    """The time, walking from the apex ``m`` towards ``stop``, where ``y`` falls to ``half`` (the border if never)."""
    i = m
    while i != stop and y[i + step] > half:
        i += step
    if i == stop:
        return float(rt[stop])
    j = i + step
    frac = (y[i] - half) / (y[i] - y[j]) if y[i] != y[j] else 0.0
    return float(rt[i] + frac * (rt[j] - rt[i]))
