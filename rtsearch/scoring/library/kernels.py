"""CUDA source of spectral library scoring, computing what `rtsearch.scoring.library.scores` does in NumPy.

- ``preprocess``: `rtsearch.library.store.preprocess_peaks` for a whole batch,
  one block per spectrum, into a dense float32 row per query (``[S, n_bins]``,
  zeroed beforehand). The top-``top`` peaks are those of rank below ``top`` in
  (intensity desc, position asc), the order NumPy's stable argsort gives (ranks
  counted directly, or above `RANK_DIRECT_MAX` peaks the ``top``-th intensity
  found by bisection and its ties taken in position order); a
  bin's value is the sum of its kept peaks' square-root intensities (m/z is
  ascending, so a bin's peaks are adjacent); the norm counts every bin, those
  past the library's last bin too.
- ``narrow``: one warp per query walks the library entries of its precursor
  window (one contiguous range: the store is sorted by precursor m/z), drops
  those of another charge or outside every isotope window (``in_window``; a Da
  tolerance bounds the mass: the m/z difference times the charge), and scores each
  entry's peaks against the query row (``warp_dot``: dot, sum of squared
  products, shared bins). The best entry (first of equal dots), its sums, and
  the best dot of another peptide sequence (``pid``) are kept in registers.
- ``open_reduce``: open search ranks with a dense half-precision GEMM (the
  queries against a chunk of the dense library, `GpuLibrary._open`); this folds
  one chunk's dots of each query's entries (same charge and window checks as
  ``narrow``) into its running (best, best of another peptide).
  The fold is associative, so threads, the block's tree and the chunks merge
  the same way.
- ``pairs``: one warp per (query, entry) pair: the exact dot, squares and
  shared bins, to rescore open search's chosen entries in float64.
"""

from __future__ import annotations

from rtsearch.scoring.library.scores import C13

_SOURCE = r"""
#define C13 %(c13).17g
#define RANK_DIRECT_MAX %(rank_direct_max)d
#define FULL 0xffffffffu

__device__ __forceinline__ bool charge_ok(unsigned long long zmask, int z) {
    const int bit = z < 0 ? 0 : (z > 63 ? 63 : z);
    return zmask == 0ull || ((zmask >> bit) & 1ull);
}

// entry m/z `mz` (charge z) within `width` of the precursor at one of the isotope errors; with by_mass,
// the m/z difference times z (a Da tolerance bounds the mass). n_iso 0: the index range is the window.
__device__ __forceinline__ bool in_window(double prec, double width, int z, double mz, const int* __restrict__ iso,
                                          int n_iso, int by_mass) {
    if (n_iso == 0) return true;
    const double zz = z > 1 ? (double)z : 1.0;
    bool ok = false;
    for (int k = 0; k < n_iso; ++k) {
        double err = fabs(prec - (double)iso[k] * C13 / zz - mz);
        if (by_mass) err *= zz;
        ok |= err <= width;
    }
    return ok;
}

// query row (dense) . library entry e (sparse), summed over the warp; every lane gets the same sums
__device__ __forceinline__ void warp_dot(
    const float* __restrict__ qrow, int n_bins, const long long* __restrict__ off,
    const int* __restrict__ bins, const float* __restrict__ vals, long long e, int lane,
    double& dot, double& sq, int& cnt)
{
    double d = 0.0, s = 0.0;
    int c = 0;
    const long long hi = off[e + 1];
    for (long long p = off[e] + lane; p < hi; p += 32) {
        const int b = bins[p];
        if (b < n_bins) {
            const double prod = (double)qrow[b] * (double)vals[p];
            d += prod; s += prod * prod; c += prod > 0.0;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        d += __shfl_xor_sync(FULL, d, o);
        s += __shfl_xor_sync(FULL, s, o);
        c += __shfl_xor_sync(FULL, c, o);
    }
    dot = d; sq = s; cnt = c;
}

__device__ __forceinline__ double block_sum(double v, double* red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    double t = 0.0;
    for (int i = 0; i < (int)(blockDim.x >> 5); ++i) t += red[i];
    return t;
}

// the sum of the kept values of bin `bin`'s peaks, when i is the first kept peak of its bin; else -1
__device__ __forceinline__ double bin_value(const double* __restrict__ mz, const double* __restrict__ w,
                                            long long a, int n, int i, long long bin, double bw) {
    for (int j = i - 1; j >= 0 && (long long)floor(mz[a + j] / bw) == bin; --j)
        if (w[a + j] > 0.0) return -1.0;
    double sum = 0.0;
    for (int j = i; j < n && (long long)floor(mz[a + j] / bw) == bin; ++j) sum += w[a + j];
    return sum;
}

extern "C" __global__ void preprocess(
    const double* __restrict__ mz, const double* __restrict__ inten, const long long* __restrict__ start,
    const double* __restrict__ prec, double removal, double bw, int top, int n_bins,
    double* __restrict__ w, float* __restrict__ Q)
{
    __shared__ double red[32];
    __shared__ int s_kept;
    const int s = blockIdx.x;
    const long long a = start[s];
    const int n = (int)(start[s + 1] - a);
    const double pm = prec[s];
    if (threadIdx.x == 0) s_kept = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (fabs(mz[a + i] - pm) > removal && inten[a + i] > 0.0) atomicAdd(&s_kept, 1);
    __syncthreads();
    const bool ranked = s_kept > top;
    if (ranked && n > RANK_DIRECT_MAX) {
        // many peaks: the top-th kept intensity t by bisection over the bits of positive doubles (ordered as
        // the values), then every kept peak above t and the first (top - count above t) equal to t
        unsigned long long lo = 0ull, hi = 0x7ff0000000000000ull;   // count(>= lo) >= top > count(>= hi)
        while (hi - lo > 1ull) {
            const unsigned long long mid = lo + (hi - lo) / 2ull;
            const double t = __longlong_as_double((long long)mid);
            int c = 0;
            for (int i = threadIdx.x; i < n; i += blockDim.x)
                c += fabs(mz[a + i] - pm) > removal && inten[a + i] >= t;
            if ((int)block_sum((double)c, red) >= top) lo = mid; else hi = mid;
        }
        const double t = __longlong_as_double((long long)lo);
        int c = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const double v = inten[a + i];
            const bool above = fabs(mz[a + i] - pm) > removal && v > t;
            c += above;
            w[a + i] = above ? sqrt(v) : 0.0;
        }
        const int slots = top - (int)block_sum((double)c, red);
        __syncthreads();
        if (threadIdx.x == 0) {
            int left = slots;
            for (int i = 0; i < n && left > 0; ++i)
                if (inten[a + i] == t && fabs(mz[a + i] - pm) > removal) { w[a + i] = sqrt(t); --left; }
        }
    } else {
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const double v = inten[a + i];
            bool keep = fabs(mz[a + i] - pm) > removal && v > 0.0;
            if (keep && ranked) {
                int rank = 0;
                for (int j = 0; j < n && rank < top; ++j) {
                    const double u = inten[a + j];
                    if ((u > v || (u == v && j < i)) && fabs(mz[a + j] - pm) > removal) ++rank;
                }
                keep = rank < top;
            }
            w[a + i] = keep ? sqrt(v) : 0.0;
        }
    }
    __syncthreads();
    double sq = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        if (w[a + i] <= 0.0) continue;
        const long long bin = (long long)floor(mz[a + i] / bw);
        const double v = bin_value(mz, w, a, n, i, bin, bw);
        if (v >= 0.0) sq += v * v;
    }
    const double norm = sqrt(block_sum(sq, red));
    float* row = Q + (long long)s * n_bins;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        if (w[a + i] <= 0.0) continue;
        const long long bin = (long long)floor(mz[a + i] / bw);
        if (bin < 0 || bin >= n_bins) continue;
        const double v = bin_value(mz, w, a, n, i, bin, bw);
        if (v >= 0.0) row[bin] = (float)(norm > 0.0 ? v / norm : v);
    }
}

// out: [5, n_q] float64: best dot, its squared products, best dot of another peptide, shared bins, candidates
extern "C" __global__ void narrow(
    int n_q, const float* __restrict__ Q, int n_bins,
    const long long* __restrict__ q_a, const long long* __restrict__ q_b, const double* __restrict__ q_prec,
    const double* __restrict__ q_width, const unsigned long long* __restrict__ q_zmask,
    const int* __restrict__ iso, int n_iso, int by_mass,
    const double* __restrict__ lib_mz, const signed char* __restrict__ lib_z, const int* __restrict__ pid,
    const long long* __restrict__ off, const int* __restrict__ bins, const float* __restrict__ vals,
    long long* __restrict__ out_e, double* __restrict__ out)
{
    const long long q = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (q >= n_q) return;
    const float* qrow = Q + q * n_bins;
    const double prec = q_prec[q], width = q_width[q];
    const unsigned long long zmask = q_zmask[q];
    double v1 = -1.0, v2 = 0.0, sq1 = 0.0, c1 = 0.0, n_cand = 0.0;
    long long e1 = -1;
    int p1 = -1;
    for (long long e = q_a[q]; e < q_b[q]; ++e) {
        const int z = lib_z[e];
        if (!charge_ok(zmask, z) || !in_window(prec, width, z, lib_mz[e], iso, n_iso, by_mass)) continue;
        n_cand += 1.0;
        double d, s;
        int c;
        warp_dot(qrow, n_bins, off, bins, vals, e, lane, d, s, c);
        const int p = pid[e];
        if (d > v1) {
            if (p != p1) v2 = fmax(v1, v2);
            v1 = d; e1 = e; p1 = p; sq1 = s; c1 = (double)c;
        } else if (p != p1 && d > v2) {
            v2 = d;
        }
    }
    if (lane == 0) {
        out_e[q] = e1;
        out[q] = v1 > 0.0 ? v1 : 0.0; out[n_q + q] = sq1; out[2 * n_q + q] = v2;
        out[3 * n_q + q] = c1; out[4 * n_q + q] = n_cand;
    }
}

struct Top2 { float v1, v2; long long e1, e2; int p1; };

// (v, e) ranks above (u, f): the larger dot, then the earlier entry (NumPy's stable order)
__device__ __forceinline__ bool above(float v, long long e, float u, long long f) {
    return f < 0 || (e >= 0 && (v > u || (v == u && e < f)));
}

// best, and best of another peptide than the best, of the union of two such summaries
__device__ __forceinline__ Top2 merge(const Top2& A, const Top2& B) {
    if (B.e1 < 0) return A;
    if (A.e1 < 0) return B;
    Top2 r;
    if (A.p1 == B.p1) {
        const bool a1 = above(A.v1, A.e1, B.v1, B.e1), a2 = above(A.v2, A.e2, B.v2, B.e2);
        r.v1 = a1 ? A.v1 : B.v1; r.e1 = a1 ? A.e1 : B.e1; r.p1 = A.p1;
        r.v2 = a2 ? A.v2 : B.v2; r.e2 = a2 ? A.e2 : B.e2;
        return r;
    }
    const bool a = above(A.v1, A.e1, B.v1, B.e1);
    const Top2& W = a ? A : B;   // the winner keeps its second or takes the loser's best
    const Top2& L = a ? B : A;
    r.v1 = W.v1; r.e1 = W.e1; r.p1 = W.p1;
    const bool w2 = above(W.v2, W.e2, L.v1, L.e1);
    r.v2 = w2 ? W.v2 : L.v1; r.e2 = w2 ? W.e2 : L.e1;
    return r;
}

__device__ __forceinline__ float half_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %%0, %%1;" : "=f"(f) : "h"(h));
    return f;
}

// one block per query; D: [n_q, c1 - c0] half dots of the queries with entries c0..c1-1
extern "C" __global__ void open_reduce(
    int n_q, const unsigned short* __restrict__ D, long long c0, long long c1,
    const long long* __restrict__ q_a, const long long* __restrict__ q_b, const double* __restrict__ q_prec,
    const double* __restrict__ q_width, const unsigned long long* __restrict__ q_zmask,
    const int* __restrict__ iso, int n_iso, int by_mass,
    const double* __restrict__ lib_mz, const signed char* __restrict__ lib_z, const int* __restrict__ pid,
    float* __restrict__ st_v1, float* __restrict__ st_v2, long long* __restrict__ st_e1,
    long long* __restrict__ st_e2, int* __restrict__ st_p1, long long* __restrict__ st_n)
{
    __shared__ Top2 sh[256];
    __shared__ unsigned long long s_n;
    const int q = blockIdx.x;
    const long long lo = q_a[q] > c0 ? q_a[q] : c0, hi = q_b[q] < c1 ? q_b[q] : c1;
    if (lo >= hi) return;   // the whole block: no __syncthreads skipped by some threads only
    const unsigned long long zmask = q_zmask[q];
    const double prec = q_prec[q], width = q_width[q];
    const unsigned short* row = D + (long long)q * (c1 - c0) - c0;
    Top2 t; t.v1 = 0.f; t.v2 = 0.f; t.e1 = -1; t.e2 = -1; t.p1 = -1;
    if (threadIdx.x == 0) s_n = 0ull;
    __syncthreads();
    unsigned long long n = 0;
    for (long long e = lo + threadIdx.x; e < hi; e += blockDim.x) {
        const int z = lib_z[e];
        if (!charge_ok(zmask, z) || !in_window(prec, width, z, lib_mz[e], iso, n_iso, by_mass)) continue;
        ++n;
        Top2 one; one.v1 = half_to_float(row[e]); one.e1 = e; one.p1 = pid[e]; one.v2 = 0.f; one.e2 = -1;
        t = merge(t, one);
    }
    atomicAdd(&s_n, n);
    sh[threadIdx.x] = t;
    __syncthreads();
    for (int stride = blockDim.x >> 1; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) sh[threadIdx.x] = merge(sh[threadIdx.x], sh[threadIdx.x + stride]);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        Top2 s; s.v1 = st_v1[q]; s.v2 = st_v2[q]; s.e1 = st_e1[q]; s.e2 = st_e2[q]; s.p1 = st_p1[q];
        const Top2 r = merge(s, sh[0]);   // earlier chunks hold earlier entries: ties keep theirs
        st_v1[q] = r.v1; st_v2[q] = r.v2; st_e1[q] = r.e1; st_e2[q] = r.e2; st_p1[q] = r.p1;
        st_n[q] += (long long)s_n;
    }
}

// out: [3, n]: dot, squared products, shared bins of query pq[i] with entry pe[i] (0 where pe[i] < 0)
extern "C" __global__ void pairs(
    int n, const long long* __restrict__ pq, const long long* __restrict__ pe, const float* __restrict__ Q,
    int n_bins, const long long* __restrict__ off, const int* __restrict__ bins, const float* __restrict__ vals,
    double* __restrict__ out)
{
    const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (i >= n) return;
    double d = 0.0, s = 0.0;
    int c = 0;
    if (pe[i] >= 0) warp_dot(Q + pq[i] * n_bins, n_bins, off, bins, vals, pe[i], lane, d, s, c);
    if (lane == 0) { out[i] = d; out[n + i] = s; out[2 * n + i] = (double)c; }
}
"""

OPEN_BLOCK = 256  # threads per open_reduce block (its shared tree holds this many summaries)
# spectra with more peaks than this are ranked by bisection (64 block counts) rather than by counting,
# for each peak, the peaks above it (n^2 / threads steps). One spectrum on an H100, whole call: 2,000
# peaks counted 3.6 ms, 2,100 by bisection 0.7 ms, 50,000 by bisection 11 ms, 300 counted 0.6 ms
RANK_DIRECT_MAX = 512


def source() -> str:
    """The CUDA source with this module's constants filled in."""
    return _SOURCE % {"c13": C13, "rank_direct_max": RANK_DIRECT_MAX}
