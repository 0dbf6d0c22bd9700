"""The uneven-spacing Savitzky–Golay smoother on the GPU: a thread a point, every trace of a run in one launch a pass.

Each thread does what `rtsearch.signal.smoothing.smooth` does for its point — finds its window (the ``points``
nearest in time within its trace), sums the weighted moments of the scaled time offsets (degree ≤ ``MAX_ORDER``:
fixed arrays in registers and local memory, as the thesis's kernel), solves the normal equations by Gaussian
elimination with partial pivoting and writes the fitted value clipped at the trace's minimum — in float64; the
passes ping-pong between two device buffers. Same values as the NumPy reference to rounding
(tests/gpu/test_signal_parity.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rtsearch.scoring.backend import compiled_kernel
from rtsearch.signal.smoothing import DEFAULT, MAX_ORDER, Smoothing

THREADS = 128

SOURCE = (
    f"#define MAXD {MAX_ORDER + 1}\n"
    + r"""
extern "C" __global__ void sg_pass(const double* __restrict__ rt, const double* __restrict__ y,
                                   const long long* __restrict__ first, const long long* __restrict__ size,
                                   const double* __restrict__ floor_, long long n, int points, int order,
                                   double power, double* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long f = first[i], s = size[i];
    const long long k = points < s ? points : s;
    long long best_lo = 0; double best_w = 1.0 / 0.0;
    for (int back = 0; back < points; ++back) {  // the window starting back points before i, within the trace
        long long lo = i - back;
        if (lo < f) lo = f;
        if (lo > f + s - k) lo = f + s - k;
        const double w = fmax(rt[i] - rt[lo], rt[lo + k - 1] - rt[i]);
        if (w < best_w) { best_w = w; best_lo = lo; }
    }
    const long long lo = best_lo, hi = best_lo + k;
    int ord = (int)(hi - lo) - 2;
    ord = ord < 0 ? 0 : (ord > order ? order : ord);
    const int d = ord + 1;
    double h = 0.0;
    for (long long j = lo; j < hi; ++j) h = fmax(h, fabs(rt[j] - rt[i]));
    if (h <= 0.0) h = 1.0;
    double S[2 * MAXD - 1], R[MAXD];
    for (int a = 0; a < 2 * d - 1; ++a) S[a] = 0.0;
    for (int a = 0; a < d; ++a) R[a] = 0.0;
    for (long long j = lo; j < hi; ++j) {
        const double x = (rt[j] - rt[i]) / h, v = y[j];
        const double w = v > 1.0 ? pow(fabs(v), power) : 1.0;
        double p = w;
        for (int a = 0; a < 2 * d - 1; ++a) {
            S[a] += p;
            if (a < d) R[a] += p * v;
            p *= x;
        }
    }
    double A[MAXD][MAXD + 1];
    for (int a = 0; a < d; ++a) {
        for (int b = 0; b < d; ++b) A[a][b] = S[a + b];
        A[a][d] = R[a];
    }
    for (int c = 0; c < d; ++c) {  // Gaussian elimination, partial pivoting
        int piv = c;
        for (int r = c + 1; r < d; ++r) if (fabs(A[r][c]) > fabs(A[piv][c])) piv = r;
        if (piv != c) for (int b = c; b <= d; ++b) { double t = A[c][b]; A[c][b] = A[piv][b]; A[piv][b] = t; }
        for (int r = c + 1; r < d; ++r) {
            const double m = A[r][c] / A[c][c];
            for (int b = c; b <= d; ++b) A[r][b] -= m * A[c][b];
        }
    }
    double coef[MAXD];
    for (int r = d - 1; r >= 0; --r) {
        double acc = A[r][d];
        for (int b = r + 1; b < d; ++b) acc -= A[r][b] * coef[b];
        coef[r] = acc / A[r][r];
    }
    out[i] = fmax(coef[0], floor_[i]);
}
"""
)


def smooth_gpu(cp: Any, rt: np.ndarray, y: np.ndarray, offsets: np.ndarray, s: Smoothing = DEFAULT) -> Any:
    """`rtsearch.signal.smoothing.smooth` on the GPU (CuPy ``cp``); returns a device array."""
    if s.order > MAX_ORDER or s.order < 0 or s.points < 1:
        raise ValueError(f"order must be 0..{MAX_ORDER} and points ≥ 1")
    n = int(rt.shape[0])
    sizes = np.diff(offsets)
    first = np.repeat(offsets[:-1], sizes)
    size = np.repeat(sizes, sizes)
    nonempty = sizes > 0
    floor = np.repeat(np.minimum.reduceat(np.asarray(y, np.float64), offsets[:-1][nonempty]), sizes[nonempty])
    d_rt, d_first, d_size, d_floor = (cp.asarray(a) for a in (np.asarray(rt, np.float64), first, size, floor))
    cur, nxt = cp.asarray(np.asarray(y, np.float64)), cp.empty(n, dtype=cp.float64)
    if n == 0:
        return cur
    fn = compiled_kernel(cp, SOURCE, "sg_pass")
    for _ in range(s.passes):
        fn(((n + THREADS - 1) // THREADS,), (THREADS,), (d_rt, cur, d_first, d_size, d_floor, np.int64(n),
                                                        np.int32(s.points), np.int32(s.order),
                                                        np.float64(s.weight_power), nxt))  # fmt: skip
        cur, nxt = nxt, cur
    return cur
