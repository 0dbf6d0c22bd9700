"""Savitzky–Golay smoothing of chromatograms: the uneven-spacing variant of the Lipid Data Analyzer thesis, and
OpenMS's fixed frame; the float64 NumPy reference of every trace of a run at once.

Uneven spacing (Brandstätter, "Accelerating Peak Detection in MS Data with GPU Programming"): each point's value
is that at its own time of a least-squares polynomial fitted to its window — the ``points`` nearest in time (a
retention-time window widened until it holds that many; the whole trace when shorter), of degree ``order``,
lowered to the window's size less two when the window is small; the design matrix is the times' offsets t_j − t_i
(scaled by the window's half-width: the same fit, better conditioned); the weights are intensity^``weight_power``
above 1, else 1; the result is clipped below at the trace's minimum raw intensity; the pass is repeated
``passes`` times, each on the last's output::

    t:   t0  t1 t2    t3  t4 t5 …      point i's window: the k nearest t_j (contiguous in j)
    fit: y_j ≈ Σ_a c_a ((t_j − t_i) / h)^a, weights w_j      value: c_0 = P(t_i)

`rtsearch.signal.gpu` computes the same on the GPU, a thread a point (its parity test: tests/gpu/test_signal_parity.py).
The fixed-frame variant (OpenMS ``SavitzkyGolayFilter``: frame_length, polynomial_order) fits on the points'
indices, the frame centred, and at the ends the frame at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_ORDER = 6


@dataclass(frozen=True)
class Smoothing:
    """The uneven-spacing smoother's parameters (the thesis's defaults)."""

    points: int = 11
    order: int = 4
    passes: int = 8
    weight_power: float = 0.25


DEFAULT = Smoothing()


def windows(rt: np.ndarray, offsets: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """Each point's window [lo, hi) (global rows): the ``points`` nearest in time within its trace (the whole
    trace when shorter; among equally near windows, the earlier)."""
    n = np.diff(offsets)
    trace = np.repeat(np.arange(n.shape[0]), n)
    first, size = offsets[:-1][trace], n[trace]
    k = np.minimum(points, size)
    i = np.arange(rt.shape[0])
    best_lo, best_w = np.zeros_like(i), np.full(rt.shape[0], np.inf)
    for back in range(points):  # the window starting ``back`` points before i, kept within the trace
        lo = np.clip(i - back, first, first + size - k)
        width = np.maximum(rt[i] - rt[lo], rt[lo + k - 1] - rt[i])
        better = width < best_w
        best_lo, best_w = np.where(better, lo, best_lo), np.where(better, width, best_w)
    return best_lo, best_lo + k


def smooth(rt: np.ndarray, y: np.ndarray, offsets: np.ndarray, s: Smoothing = DEFAULT) -> np.ndarray:
    """The traces' values (CSR: ``offsets``) smoothed ``s.passes`` times (see the module docstring)."""
    if s.order > MAX_ORDER or s.order < 0 or s.points < 1:
        raise ValueError(f"order must be 0..{MAX_ORDER} and points ≥ 1")
    rt, out = np.asarray(rt, np.float64), np.asarray(y, np.float64).copy()
    if rt.shape[0] == 0:
        return out
    lo, hi = windows(rt, offsets, s.points)
    n = np.diff(offsets)
    floor = np.minimum.reduceat(out, offsets[:-1][n > 0])[np.repeat(np.arange(int((n > 0).sum())), n[n > 0])]
    width = hi - lo
    order = np.clip(width - 2, 0, s.order)
    cols = np.arange(int(width.max()))
    at = np.minimum(lo[:, None] + cols[None, :], rt.shape[0] - 1)
    inside = cols[None, :] < width[:, None]
    x = np.where(inside, rt[at] - rt[:, None], 0.0)
    h = np.abs(x).max(axis=1)
    x = x / np.where(h > 0, h, 1.0)[:, None]
    powers = x[:, :, None] ** np.arange(s.order + 1)[None, None, :]  # [points, window, degree]
    used = np.arange(s.order + 1)[None, :] <= order[:, None]
    for _ in range(s.passes):
        v = out[at]
        w = np.where(inside, np.where(v > 1.0, np.abs(v) ** s.weight_power, 1.0), 0.0)
        a = np.einsum("pw,pwa,pwb->pab", w, powers, powers)
        b = np.einsum("pw,pwa,pw->pa", w, powers, v)
        off = ~(used[:, :, None] & used[:, None, :])  # degrees above a point's order: identity rows, no right side
        a[off] = 0.0
        a[:, np.arange(s.order + 1), np.arange(s.order + 1)] += ~used
        b[~used] = 0.0
        out = np.maximum(np.linalg.solve(a, b[..., None])[:, 0, 0], floor)
    return out


def smooth_fixed(y: np.ndarray, offsets: np.ndarray, *, frame: int = 11, order: int = 4) -> np.ndarray:
    """OpenMS's fixed-frame Savitzky–Golay filter of each trace: the least-squares polynomial of degree ``order``
    over ``frame`` consecutive points (odd), by index; near the ends the end frame, evaluated at the point."""
    if frame % 2 == 0 or order >= frame:
        raise ValueError("frame must be odd and larger than order")
    y = np.asarray(y, np.float64)
    out = y.copy()
    for k in range(offsets.shape[0] - 1):
        a, b = int(offsets[k]), int(offsets[k + 1])
        n = b - a
        if n < frame:
            continue
        idx = np.arange(frame)
        pinv = np.linalg.pinv(np.vander(idx - frame // 2, order + 1, increasing=True))  # rows: coefficients
        windows_ = np.lib.stride_tricks.sliding_window_view(y[a:b], frame)
        out[a + frame // 2 : b - frame // 2] = windows_ @ pinv[0]
        for edge, start in ((range(frame // 2), 0), (range(n - frame // 2, n), n - frame)):
            coef = np.linalg.lstsq(np.vander(idx, order + 1, increasing=True), y[a + start : a + start + frame],
                                   rcond=None)[0]  # fmt: skip
            for i in edge:
                out[a + i] = np.polyval(coef[::-1], i - start)
    return out
