"""A query's ``k`` best candidates over the chunks of its precursor window, in one kernel.

The count kernel (`rtsearch.scoring.database.kernels`) scores a query's window in chunks of ``CHUNK`` peptides,
one CUDA block a chunk, each writing its ``k`` best; a window wider than a chunk (a wide precursor tolerance: 200
Da spans ~100 chunks of the 20,000-protein bench index) then needs those lists merged into the query's ``k`` best
by (count desc, peptide asc). `merge_chunks` does it with whole-array operations (a 64-bit key sort) — NumPy's,
the reference — and on CuPy costs ~20 calls of ~30 µs host time and a sort a batch: the merge held 3.6 of the
6.5 ms a batch of 26 spectra took at 200 Da (cProfile, docs/history/RESULTS.md, 2026-11-27). ``merge_topk`` does it in
one launch: a block a query counts its chunks' entries by count (a histogram), finds the count ``T`` that the
``k``-th best reaches, gathers the entries of count ≥ ``T`` into shared memory and ranks each among them (those
below ``T`` cannot rank better than ``k``); ranks are unique (a peptide is in one chunk), so each entry ranked
under ``k`` writes its own slot. tests/gpu/test_merge_kernel.py compares the two.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rtsearch.scoring.backend import compiled_kernel
from rtsearch.scoring.database.kernels import MAX_COUNT

GATHERED = 3072  # entries of count >= T a block ranks in shared memory (36 KiB of its 48); more (ties): from global

_TEMPLATE = r"""
#define MAX_COUNT %(max_count)d
#define GATHERED %(gathered)d

__device__ __forceinline__ bool beats(int c1, long long p1, int c2, long long p2) {
    return c1 > c2 || (c1 == c2 && p1 < p2);
}

extern "C" __global__ void merge_topk(
    const long long* __restrict__ tp,       // [T, k] each task's best peptides, -1: none
    const int* __restrict__ tc,             // [T, k] their counts (<= MAX_COUNT)
    const long long* __restrict__ first,    // [Q + 1] each query's first task (a query's tasks are consecutive)
    const int k,
    long long* __restrict__ out_pep,        // [Q, k] -1: none
    int* __restrict__ out_cnt)              // [Q, k] 0: none
{
    __shared__ int hist[MAX_COUNT + 1];
    __shared__ long long s_pep[GATHERED];
    __shared__ int s_cnt[GATHERED];
    __shared__ int s_threshold, s_n;
    const long long q = blockIdx.x;
    const long long e0 = first[q] * k, e1 = first[q + 1] * k;
    for (int i = threadIdx.x; i <= MAX_COUNT; i += blockDim.x) hist[i] = 0;
    for (int r = threadIdx.x; r < k; r += blockDim.x) { out_pep[q * k + r] = -1; out_cnt[q * k + r] = 0; }
    if (threadIdx.x == 0) s_n = 0;
    __syncthreads();
    for (long long e = e0 + threadIdx.x; e < e1; e += blockDim.x)
        if (tp[e] >= 0) atomicAdd(&hist[tc[e]], 1);
    __syncthreads();
    if (threadIdx.x == 0) {  // the count the k-th best reaches (0: fewer than k entries, all of them rank)
        int seen = 0, t = 0;
        for (int c = MAX_COUNT; c >= 0; --c) {
            seen += hist[c];
            if (seen >= k) { t = c; break; }
        }
        s_threshold = t;
    }
    __syncthreads();
    const int t = s_threshold;
    for (long long e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
        if (tp[e] < 0 || tc[e] < t) continue;
        const int i = atomicAdd(&s_n, 1);
        if (i < GATHERED) { s_pep[i] = tp[e]; s_cnt[i] = tc[e]; }
    }
    __syncthreads();  // the slots' -1 / 0 are written before any rank's entry
    const int n = s_n;
    if (n <= GATHERED) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const int c = s_cnt[i];
            const long long p = s_pep[i];
            int rank = 0;
            for (int j = 0; j < n && rank < k; ++j) rank += beats(s_cnt[j], s_pep[j], c, p);
            if (rank < k) { out_pep[q * k + rank] = p; out_cnt[q * k + rank] = c; }
        }
    } else {  // more ties at T than shared memory holds: ranked against the chunks' lists as they lie
        for (long long e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
            if (tp[e] < 0 || tc[e] < t) continue;
            const int c = tc[e];
            const long long p = tp[e];
            int rank = 0;
            for (long long f = e0; f < e1 && rank < k; ++f) rank += tp[f] >= 0 && beats(tc[f], tp[f], c, p);
            if (rank < k) { out_pep[q * k + rank] = p; out_cnt[q * k + rank] = c; }
        }
    }
}
"""


def merge_chunks(xp: Any, t_query: Any, tp: Any, tc: Any, out_pep: Any, out_cnt: Any) -> None:
    """Each query's ``k`` best (peptide, count) over its tasks' lists ``tp`` / ``tc`` [T, k] (``t_query``: each
    task's query), by count desc then peptide asc, into ``out_pep`` / ``out_cnt`` [Q, k]; -1 / 0 where fewer."""
    n_q, k = out_pep.shape
    out_pep.fill(-1)
    out_cnt.fill(0)
    valid = tp >= 0
    qq = xp.broadcast_to(xp.asarray(t_query)[:, None], tp.shape)[valid]
    pp, cc = tp[valid], tc[valid]
    key = (qq.astype(xp.uint64) << xp.uint64(42)) | ((MAX_COUNT - cc).astype(xp.uint64) << xp.uint64(32))
    key |= pp.astype(xp.uint64)
    order = xp.argsort(key)
    qq, pp, cc = qq[order], pp[order], cc[order]
    start = xp.searchsorted(qq, xp.arange(n_q), side="left")
    rank = xp.arange(qq.shape[0]) - start[qq]
    sel = rank < k
    out_pep[qq[sel], rank[sel]] = pp[sel]
    out_cnt[qq[sel], rank[sel]] = cc[sel]


def merge_on_device(cp: Any, first: Any, tp: Any, tc: Any, out_pep: Any, out_cnt: Any) -> None:
    """`merge_chunks` by ``merge_topk`` into ``out_pep`` / ``out_cnt`` [Q, k] (CuPy, C-contiguous); ``first``
    [Q + 1] (device int64): each query's first task, its tasks consecutive."""
    n_q, k = out_pep.shape
    if n_q:
        fn = compiled_kernel(cp, SOURCE, "merge_topk")
        fn((n_q,), (256,), (tp, tc, first, np.int32(k), out_pep, out_cnt))


SOURCE = _TEMPLATE % {"max_count": MAX_COUNT, "gathered": GATHERED}  # filled once: the compile cache's key
