"""CUDA source of the alignment (`rtsearch.scoring.topdown.align`'s rules, cell for cell): one thread block a
(spectrum, proteoform) pair, its rows one after the other, its columns over the threads.

Per row: (1) each column's cell finds its diagonal predecessor in the pair's bins — a bin holds its latest
cell packed as ((row + 1) << 32 | column + 1), so ``atomicMax`` keeps the latest by row then column as the
reference's in-order writes do, and beside it that cell's D for every number of shifts — and computes its D;
(2) the H row is the previous one's maximum with D, then a block-wide running maximum over the columns;
(3) the row's new cells are written into their bins (``atomicMax``), (4) the winners store their D there.
"""

from __future__ import annotations

SOURCE = r"""
#define NONE (-(1 << 30))
#define MAX_F 16  // layers at most (`gpu.MAX_LAYERS`)

__device__ __forceinline__ long long bin_key(double d, double reach, double tol) {
    return (long long)floor((d + reach) / tol) + 1;
}

extern "C" __global__ void align_pairs(
    const double* __restrict__ prm, const long long* __restrict__ prm_off,
    const double* __restrict__ pre, const long long* __restrict__ pre_off,
    const int* __restrict__ pair_s, const int* __restrict__ pair_f, const double* __restrict__ end_tols,
    int n_pairs, const double* __restrict__ tols, int K, double shift_range,
    const double* __restrict__ known, int n_known, int FC,
    unsigned long long* bins, int* bin_d, long long nbins_max,
    int* hrows, int* dcur, long long* colkey, signed char* colnew, long long ncol_max,
    int* out)
{
    const int p = blockIdx.x;
    if (p >= n_pairs) return;
    const double* s = prm + prm_off[pair_s[p]];
    const int m = (int)(prm_off[pair_s[p] + 1] - prm_off[pair_s[p]]);
    const double* P = pre + pre_off[pair_f[p]];
    const int n = (int)(pre_off[pair_f[p] + 1] - pre_off[pair_f[p]]);
    const int F = (K + 1) * FC;  // layers: (unknown shifts u, known ones c) at u * FC + c
    const double tol = tols[p];
    const double limit = shift_range + tol;
    const double end_tol = fmax(tol, end_tols[p]);
    const double reach = limit + end_tol;
    const long long nbins = (long long)ceil(2.0 * reach / tol) + 3;
    unsigned long long* B = bins + (long long)p * nbins_max;
    int* BD = bin_d + (long long)p * nbins_max * F;
    int* Hprev = hrows + (long long)p * 2 * F * ncol_max;
    int* Hcur = Hprev + F * ncol_max;
    int* Dc = dcur + (long long)p * F * ncol_max;
    long long* CK = colkey + (long long)p * ncol_max;
    signed char* CN = colnew + (long long)p * ncol_max;
    __shared__ int chunk_max[256];
    const int T = blockDim.x, t = threadIdx.x;

    for (int j = t; j < n; j += T)
        for (int f = 0; f < F; ++f) Hprev[f * ncol_max + j] = 0;  // the origin, reachable with any f
    if (t == 0) {
        long long k0 = bin_key(0.0, reach, tol);
        B[k0] = (1ULL << 32) | 1ULL;  // cell (0, 0)
        for (int f = 0; f < F; ++f) BD[k0 * F + f] = 0;
    }
    __syncthreads();
    for (int i = 1; i < m; ++i) {
        const bool end = (i == m - 1);
        const int gain = end ? 0 : 1;
        const double within = end ? end_tol : tol;
        const int r = (int)ceil(within / tol);
        for (int j = t; j < n; j += T) {
            bool ok = false;
            long long key = 0;
            double d = 0.0;
            if (j >= 1) {
                d = s[i] - P[j];
                ok = fabs(d) <= limit + (end ? end_tol : 0.0);
                if (end) ok = ok && (j == n - 1);
            }
            int bf[MAX_F];
            for (int f = 0; f < F; ++f) bf[f] = NONE;
            if (ok) {
                key = bin_key(d, reach, tol);
                for (int q = 0; q <= n_known; ++q) {  // the diagonal, then each known shift's
                    const double dq = q == 0 ? d : d - known[q - 1];
                    const long long kq = q == 0 ? key : bin_key(dq, reach, tol);
                    unsigned long long best = 0;
                    long long bestk = -1;
                    for (int off = -r; off <= r; ++off) {
                        long long kk = kq + off;
                        kk = kk < 0 ? 0 : (kk > nbins - 1 ? nbins - 1 : kk);
                        unsigned long long v = B[kk];
                        if (v == 0ULL) continue;
                        int ci = (int)(v >> 32) - 1, cj = (int)(v & 0xffffffffULL) - 1;
                        if (cj < j && fabs((s[ci] - P[cj]) - dq) <= within && v > best) { best = v; bestk = kk; }
                    }
                    if (bestk >= 0)
                        for (int f = 0; f < F; ++f) {  // the diagonal: the same layer; a known shift: one fewer
                            if (q == 0) bf[f] = max(bf[f], BD[bestk * F + f]);
                            else if (f % FC) bf[f] = max(bf[f], BD[bestk * F + f - 1]);
                        }
                }
            }
            for (int f = 0; f < F; ++f) {
                int b = NONE;
                if (ok) {
                    b = bf[f];
                    if (f >= FC) { int h = Hprev[(f - FC) * ncol_max + j - 1]; b = h > b ? h : b; }
                }
                Dc[f * ncol_max + j] = b > NONE ? b + gain : NONE;
            }
            unsigned long long here = ok ? B[key] : 0ULL;
            CK[j] = key;
            CN[j] = ok && (here == 0ULL || (int)(here & 0xffffffffULL) - 1 != j);
        }
        __syncthreads();
        const int chunk = (n + T - 1) / T;
        const int lo = t * chunk, hi = min(n, lo + chunk);
        for (int f = 0; f < F; ++f) {
            int run = NONE;
            for (int j = lo; j < hi; ++j) {
                int v = max(Dc[f * ncol_max + j], Hprev[f * ncol_max + j]);
                run = max(run, v);
                Hcur[f * ncol_max + j] = run;
            }
            chunk_max[t] = run;
            __syncthreads();
            if (t == 0) {
                int acc = NONE;
                for (int u = 0; u < T; ++u) { int v = chunk_max[u]; chunk_max[u] = acc; acc = max(acc, v); }
            }
            __syncthreads();
            const int before = chunk_max[t];
            for (int j = lo; j < hi; ++j) Hcur[f * ncol_max + j] = max(Hcur[f * ncol_max + j], before);
            __syncthreads();
        }
        for (int j = t; j < n; j += T)
            if (CN[j]) atomicMax(&B[CK[j]], ((unsigned long long)(i + 1) << 32) | (unsigned long long)(j + 1));
        __syncthreads();
        for (int j = t; j < n; j += T)
            if (CN[j] && B[CK[j]] == (((unsigned long long)(i + 1) << 32) | (unsigned long long)(j + 1)))
                for (int f = 0; f < F; ++f) BD[CK[j] * F + f] = Dc[f * ncol_max + j];
        __syncthreads();
        int* tmp = Hprev; Hprev = Hcur; Hcur = tmp;
    }
    if (t == 0)
        for (int f = 0; f < F; ++f) out[p * F + f] = m > 1 ? Dc[f * ncol_max + n - 1] : NONE;
}
"""

DIAGONAL_SOURCE = r"""
// Per position p of the laid prefix masses g (ascending): how many PRMs s[i] (ascending) fall within tol of some
// g[q] at g[p] + s[i] (its N-terminal diagonal, as a start) and at g[p] - (m_res - s[i]) (its C-terminal one, as
// an end). Each target is placed as searchsorted(g, x) places it and compared with its two neighbours, as the
// reference's `near` does; the targets ascend with i, so one walk forward from a binary search finds them all.
__device__ __forceinline__ long long lower_bound(const double* g, long long n, double x) {
    long long lo = 0, hi = n;
    while (lo < hi) { long long mid = (lo + hi) >> 1; if (g[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
}

__device__ __forceinline__ int walk(const double* g, long long n, const double* s, int m, double base, int sign,
                                    double m_res, double tol) {
    int count = 0;
    long long q = -1;
    for (int i = 0; i < m; ++i) {
        const double x = sign > 0 ? base + s[i] : base - (m_res - s[i]);
        if (q < 0) q = lower_bound(g, n, x);
        while (q < n && g[q] < x) ++q;
        const long long hi = q < n - 1 ? q : n - 1, lo = q > 0 ? q - 1 : 0;
        if (fmin(fabs(g[hi] - x), fabs(g[lo] - x)) <= tol) ++count;
    }
    return count;
}

extern "C" __global__ void diagonal_counts(const double* __restrict__ g, long long n, const double* __restrict__ s,
                                           int m, double m_res, double tol, int* n_count, int* c_count) {
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    n_count[p] = walk(g, n, s, m, g[p], 1, m_res, tol);
    c_count[p] = walk(g, n, s, m, g[p], -1, m_res, tol);
}
"""

GENERATING_SOURCE = r"""
// `rtsearch.scoring.topdown.generating`'s table, a block a PrSM: rows of a chunk (no longer than the smallest
// residue step, so they depend only on earlier rows) a thread a cell, in a ring of rows (the largest step plus a
// chunk: a row written never overwrites one still read). Each cell sums its residues in the reference's order, and
// the end rows' pre-mark values are added to the ends in row order by one thread a score; compile without fused
// multiply-add so that every sum is the reference's.
__device__ __forceinline__ bool is_marked(const int* m, long long n, long long row) {
    long long lo = 0, hi = n;
    while (lo < hi) { long long mid = (lo + hi) >> 1; if (m[mid] < row) lo = mid + 1; else hi = mid; }
    return lo < n && m[lo] == row;
}

extern "C" __global__ void generating_ends(
    const int* __restrict__ steps, int A, const double* __restrict__ freq, const int* __restrict__ marked,
    const long long* __restrict__ mark_off, const long long* __restrict__ rows, const int* __restrict__ chunks,
    const long long* __restrict__ rings, const long long* __restrict__ heights,
    const long long* __restrict__ table_off, double* table, const long long* __restrict__ end_off, double* ends)
{
    const int q = blockIdx.x, t = threadIdx.x, T = blockDim.x;
    const int* r = steps + (long long)q * A;
    const long long start = rows[3 * q], end_lo = rows[3 * q + 1], last = rows[3 * q + 2];
    const long long H = heights[q], R = rings[q];
    const int C = chunks[q];
    double* tab = table + table_off[q];
    const int* M = marked + mark_off[q];
    const long long nm = mark_off[q + 1] - mark_off[q];
    double* E = ends + end_off[q];
    if (t == 0) tab[(start % R) * H] = 1.0;
    __syncthreads();
    for (long long lo = start + 1; lo <= last; lo += C) {
        const long long hi = lo + C < last + 1 ? lo + C : last + 1;
        for (long long c = t; c < (hi - lo) * H; c += T) {
            const long long row = lo + c / H, h = c % H;
            double acc = 0.0, below = 0.0;
            for (int a = 0; a < A; ++a) {
                const long long from = row - r[a];
                if (from < 0) continue;
                const double* src = tab + (from % R) * H;
                acc = acc + freq[a] * src[h];
                if (h > 0) below = below + freq[a] * src[h - 1];
            }
            double v = acc;
            if (is_marked(M, nm, row)) v = h == 0 ? 0.0 : (h == H - 1 ? below + acc : below);
            tab[(row % R) * H + h] = v;
        }
        __syncthreads();
        for (long long h = t; h < H; h += T) {
            for (long long row = lo > end_lo ? lo : end_lo; row < hi; ++row) {
                double acc = 0.0;
                for (int a = 0; a < A; ++a) {
                    const long long from = row - r[a];
                    if (from >= 0) acc = acc + freq[a] * tab[(from % R) * H + h];
                }
                E[h] = E[h] + acc;
            }
        }
        __syncthreads();
    }
}
"""

FORM_DIAGONALS_SOURCE = r"""
// `rtsearch.scoring.topdown.search.diagonal_counts` of many (spectrum, form) pairs, a block a pair, a thread a PRM:
// the PRM's two targets (on the lane the reference lays the form in, the same sums in the same order) placed among
// the form's inner prefix masses as searchsorted places them and compared with their two neighbours.
__device__ __forceinline__ bool near_form(const double* P, long long b, long long e, double delta, double lane,
                                          double x, double tol) {
    const double base = P[b];
    long long lo = b + 1, hi = e;  // the inner positions [b + 1, e)
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (((P[mid] - base) + delta) + lane < x) lo = mid + 1; else hi = mid;
    }
    bool hit = false;
    if (lo < e) hit = fabs((((P[lo] - base) + delta) + lane) - x) <= tol;
    if (lo > b + 1) hit = hit || fabs((((P[lo - 1] - base) + delta) + lane) - x) <= tol;
    return hit;
}

extern "C" __global__ void form_diagonals(
    const double* __restrict__ prefix, const long long* __restrict__ base, const long long* __restrict__ last,
    const double* __restrict__ delta, const double* __restrict__ lane, const double* __restrict__ shift,
    const double* __restrict__ tol, const int* __restrict__ prm_of, const double* __restrict__ prm,
    const long long* __restrict__ prm_off, int n_pairs, int* out)
{
    const int p = blockIdx.x;
    if (p >= n_pairs) return;
    const double* s = prm + prm_off[prm_of[p]];
    const int m = (int)(prm_off[prm_of[p] + 1] - prm_off[prm_of[p]]);
    const double t = tol[p], d = shift[p];
    int count = 0;
    for (int i = 1 + threadIdx.x; i < m - 1; i += blockDim.x) {
        bool hit = near_form(prefix, base[p], last[p], delta[p], lane[p], s[i] + lane[p], t);
        if (!hit && fabs(d) > t) hit = near_form(prefix, base[p], last[p], delta[p], lane[p], (s[i] - d) + lane[p], t);
        count += hit;
    }
    atomicAdd(out + p, count);
}
"""
