"""Each spectrum's best candidate chosen on the GPU, in one kernel: what `features._choose` computes, per spectrum.

The batch's queries are consecutive groups, one per spectrum (``starts``). One thread a group walks its
queries' candidates once: the best (higher score, then the lower peptide number, then the earlier query), how
many candidates scored and their sum and sum of squares (for ``score_z``), then again for the best score of
another peptide (for ``delta_score``), and gathers the chosen candidate's statistics. Two small arrays come
back to the host, instead of the [Q, k] candidates and ten [Q, k] statistics.

The NumPy reference is `rtsearch.scoring.database.features._choose` (the same rules with whole-array
operations, which also run on CuPy: ~150 calls of ~30 µs host time each, docs/history/RESULTS.md);
tests/gpu/test_parity.py compares the two on the four dev runs, every rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rtsearch.scoring.backend import compiled_kernel

SOURCE = r"""
// NVRTC has no <math.h>: -inf by its bits, and "finite" as two comparisons (NaN fails both)
#define NEG_INF __longlong_as_double(0xfff0000000000000LL)
#define FINITE(x) ((x) >= -1.7976931348623157e308 && (x) <= 1.7976931348623157e308)
// a candidate's score: as given, else the primary statistic where there is a candidate (features.best_matches)
#define SCORE(i) (score ? score[i] : (cand[i] >= 0 ? stats[primary * qk + (i)] : NEG_INF))

extern "C" __global__ void choose_best(
    const int n_groups, const int k, const long long qk, const int n_stats, const int primary,
    const long long* __restrict__ starts,   // [G + 1]: the groups' first queries
    const double* __restrict__ score,       // [Q, k]; -inf: no candidate, or set aside; null: stats[primary]
    const long long* __restrict__ cand,     // [Q, k]
    const double* __restrict__ stats,       // [n_stats, Q, k]
    const int* __restrict__ prelim,         // [Q, k]
    long long* __restrict__ out_int,        // [3, G]: query (-1: none), column, peptide
    double* __restrict__ out_f)             // [5 + n_stats + 1, G]: best, next, n, sum, sum of squares, stats, prelim
{
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_groups) return;
    const long long q0 = starts[g], q1 = starts[g + 1];
    double best = NEG_INF, n = 0.0, sum = 0.0, sq = 0.0;
    long long bq = -1, bk = -1, bp = 0x7fffffffffffffffLL;
    for (long long q = q0; q < q1; ++q) {
        for (int j = 0; j < k; ++j) {
            const double s = SCORE(q * k + j);
            if (!FINITE(s)) continue;
            n += 1.0; sum += s; sq += s * s;
            const long long p = cand[q * k + j];
            if (s > best || (s == best && p < bp)) { best = s; bp = p; bq = q; bk = j; }
        }
    }
    double next = NEG_INF;
    for (long long q = q0; q < q1; ++q) {
        for (int j = 0; j < k; ++j) {
            const double s = SCORE(q * k + j);
            if (FINITE(s) && cand[q * k + j] != bp && s > next) next = s;
        }
    }
    out_int[g] = bq;
    out_int[n_groups + g] = bk;
    out_int[2 * n_groups + g] = bq < 0 ? -1 : bp;
    out_f[g] = best;
    out_f[n_groups + g] = next;
    out_f[2 * n_groups + g] = n;
    out_f[3 * n_groups + g] = sum;
    out_f[4 * n_groups + g] = sq;
    const long long at = bq < 0 ? 0 : bq * k + bk;
    for (int f = 0; f < n_stats; ++f) out_f[(5 + f) * n_groups + g] = bq < 0 ? 0.0 : stats[f * qk + at];
    out_f[(5 + n_stats) * n_groups + g] = bq < 0 ? 0.0 : (double)prelim[at];
}
"""


def choose_on_device(
    cp: Any, cand: Any, prelim: Any, stats: list[Any], starts: np.ndarray, *, score: Any = None, primary: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(ints [3, G], floats [5 + len(stats) + 1, G])`` on the host, as the kernel's comments lay them out;
    ``starts`` [G + 1] on the host; ``score`` None: ``stats[primary]`` where ``cand`` >= 0, -inf elsewhere."""
    n_q, k = cand.shape
    g = starts.shape[0] - 1
    out_int = cp.empty((3, g), dtype=cp.int64)
    out_f = cp.empty((5 + len(stats) + 1, g), dtype=cp.float64)
    if g:
        fn = compiled_kernel(cp, SOURCE, "choose_best")
        fn(((g + 127) // 128,), (128,),
           (np.int32(g), np.int32(k), np.int64(n_q * k), np.int32(len(stats)), np.int32(primary),
            cp.asarray(starts, dtype=cp.int64),
            np.uint64(0) if score is None else cp.ascontiguousarray(score, dtype=cp.float64),
            cp.ascontiguousarray(cand, dtype=cp.int64), _stacked(cp, stats, n_q * k),
            cp.ascontiguousarray(prelim, dtype=cp.int32), out_int, out_f))  # fmt: skip
    return out_int.get(), out_f.get()


def _stacked(cp: Any, stats: list[Any], qk: int) -> Any:
    """``stats`` as one [len(stats), Q, k] float64 array: a view when they already lie so, one after the other in
    one buffer (what `GpuIndex.score` returns), else a copy."""
    first = stats[0]
    laid = all(s.dtype == cp.float64 and s.flags.c_contiguous and s.data.ptr == first.data.ptr + 8 * qk * i
               for i, s in enumerate(stats))  # fmt: skip
    if laid:
        return cp.ndarray((len(stats), qk), dtype=cp.float64, memptr=first.data)
    return cp.stack([cp.ascontiguousarray(s, dtype=cp.float64).reshape(-1) for s in stats])
