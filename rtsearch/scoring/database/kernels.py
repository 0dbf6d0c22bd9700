"""CUDA source of the two hot steps, computing exactly what the NumPy references do.

- ``count_select``: `rtsearch.scoring.database.candidates.candidates_numpy` — one
  CUDA block per (query, chunk of its peptide window): matched-fragment
  counts in a shared-memory histogram, isotope-window mask, then the ``k``
  best by (count desc, peptide asc) chosen with a count histogram and an
  ordered block scan, written in that order. Only queries whose window spans
  several chunks need a merge afterwards (`rtsearch.scoring.database.merge_kernel`,
  one launch; its NumPy reference a 64-bit key sort).
- ``match``: `rtsearch.scoring.database.matching.match_numpy` — one thread per
  (query, candidate slot) of the ``[Q, k]`` candidates: b/y ions built from
  residue masses in the same order of float64 additions, matched to the most
  intense peak in tolerance; the ten statistics go to one ``[10, Q, k]`` array.

`rtsearch.scoring.database.gpu.GpuIndex` compiles and launches them. Parity with NumPy is
tested in ``tests/gpu``.
"""

from __future__ import annotations

from rtsearch.scoring.database.matching import STATS, XCORR_HALF_WINDOW, MatchStats
from rtsearch.types import C13_DELTA, H2O, PROTON

# the match kernel writes its outputs in STATS order; the stacked result is read back as MatchStats
assert tuple(MatchStats.__dataclass_fields__) == STATS and len(STATS) == 10

CHUNK = 8192  # peptides per block histogram (32 KiB of shared memory)
MAX_COUNT = 1023  # counts are capped here for the selection histogram
MAX_WIDTH = 256  # peaks per spectrum the matcher's bitmask holds
MAX_LENGTH = 64  # residues per peptide the matcher's local array holds

_SOURCE = r"""
#define CHUNK %(chunk)d
#define CHUNK_BITS %(chunk_bits)d
#define NEG_INF __longlong_as_double((long long)0xfff0000000000000ULL)
#define MAX_COUNT %(max_count)d
#define MAX_WORDS %(max_words)d
#define MAX_PEAKS %(max_peaks)d
#define C13 %(c13).17g
#define PROTON %(proton).17g
#define H2O %(h2o).17g
#define XHALF %(xhalf).17g

extern "C" __global__ void count_select(
    const float* __restrict__ frag_mz, const unsigned int* __restrict__ frag_pep,
    const float* __restrict__ bucket_min, int n_buckets, long long n_frag, int bucket_size,
    const double* __restrict__ peaks_mz, int width, const int* __restrict__ n_peaks,
    const long long* __restrict__ t_query, const long long* __restrict__ t_lo, const long long* __restrict__ t_hi,
    const long long* __restrict__ q_spec, const double* __restrict__ q_mass,
    const double* __restrict__ pep_mass,
    double frag_tol, int frag_ppm, double prec_tol, int prec_ppm,
    const int* __restrict__ iso, int n_iso, int k, int min_count,
    long long* __restrict__ out_pep, int* __restrict__ out_cnt)
{
    __shared__ unsigned int hist[CHUNK];
    __shared__ int count_hist[MAX_COUNT + 1];
    __shared__ int warp_sums[32];
    __shared__ double s_pm[MAX_PEAKS], s_tol[MAX_PEAKS];
    __shared__ int s_b0[MAX_PEAKS], s_nb[MAX_PEAKS];
    __shared__ int s_threshold, s_take_at, s_n_out, s_base, s_max_nb, s_max_count;
    const int task = blockIdx.x;
    const long long q = t_query[task];
    const long long lo = t_lo[task], hi = t_hi[task];
    const int span = (int)(hi - lo);
    const long long spec = q_spec[q];
    for (int i = threadIdx.x; i < span; i += blockDim.x) hist[i] = 0;
    for (int i = threadIdx.x; i <= MAX_COUNT; i += blockDim.x) count_hist[i] = 0;
    if (threadIdx.x == 0) { s_n_out = 0; s_base = 0; s_max_nb = 0; s_max_count = 0; }
    __syncthreads();

    // 1. per peak, the buckets that can hold m/z within tolerance (bucket minima: small, cached)
    const int npk = n_peaks[spec];
    for (int p = threadIdx.x; p < npk; p += blockDim.x) {
        const double pm = peaks_mz[spec * width + p];
        const double tol = frag_ppm ? pm * frag_tol * 1e-6 : frag_tol;
        const double a = pm - tol, b = pm + tol;
        int l = 0, h = n_buckets;                 // first bucket with min >= a
        while (l < h) { int m = (l + h) >> 1; if ((double)bucket_min[m] < a) l = m + 1; else h = m; }
        int b0 = l - 1; if (b0 < 0) b0 = 0;
        l = b0; h = n_buckets;                    // first bucket with min > b
        while (l < h) { int m = (l + h) >> 1; if ((double)bucket_min[m] <= b) l = m + 1; else h = m; }
        s_pm[p] = pm; s_tol[p] = tol; s_b0[p] = b0; s_nb[p] = l - b0;
        atomicMax(&s_max_nb, l - b0);
    }
    __syncthreads();
    // 2. one thread per (peak, bucket): the binary searches are chains of dependent global loads,
    //    so latency, not bandwidth, bounds a small batch; spreading the pairs over the block's threads
    //    shortens the longest chain (one peak's ~10 buckets were one thread's work before)
    const int max_nb = s_max_nb;
    for (int idx = threadIdx.x; idx < npk * max_nb; idx += blockDim.x) {
        const int p = idx / max_nb, j = idx - p * max_nb;
        if (j >= s_nb[p]) continue;
        const double pm = s_pm[p], tol = s_tol[p];
        const long long start = (long long)(s_b0[p] + j) * bucket_size;
        long long end = start + bucket_size; if (end > n_frag) end = n_frag;
        // both ends of the peptide window searched together: two independent load chains
        long long l1 = start, h1 = end, l2 = start, h2 = end;
        while (l1 < h1 || l2 < h2) {
            if (l1 < h1) { long long m = (l1 + h1) >> 1; if (frag_pep[m] < (unsigned int)lo) l1 = m + 1; else h1 = m; }
            if (l2 < h2) { long long m = (l2 + h2) >> 1; if (frag_pep[m] < (unsigned int)hi) l2 = m + 1; else h2 = m; }
        }
        for (long long f = l1; f < l2; ++f) {
            if (fabs((double)frag_mz[f] - pm) <= tol) atomicAdd(&hist[frag_pep[f] - (unsigned int)lo], 1u);
        }
    }
    __syncthreads();

    // mask: count threshold and isotope windows
    const double mass = q_mass[q];
    const double pw = prec_ppm ? mass * prec_tol * 1e-6 : prec_tol;
    for (int i = threadIdx.x; i < span; i += blockDim.x) {
        unsigned int c = hist[i];
        if (c == 0) continue;
        bool ok = false;
        const double pmass = pep_mass[lo + i];
        for (int e = 0; e < n_iso; ++e) ok |= fabs(mass - iso[e] * C13 - pmass) <= pw;
        if (!ok || (int)c < min_count) { hist[i] = 0; continue; }
        if (c > MAX_COUNT) { c = MAX_COUNT; hist[i] = c; }
        atomicAdd(&count_hist[c], 1);
        atomicMax(&s_max_count, (int)c);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int acc = 0, t = 0, take = 0;
        for (int c = s_max_count; c >= 1; --c) {
            if (acc + count_hist[c] >= k) { t = c; take = k - acc; break; }
            acc += count_hist[c];
        }
        if (t == 0) { t = 1; take = 0; }  // fewer than k: every nonzero count is above "t - 1"
        s_threshold = t; s_take_at = take;
    }
    __syncthreads();
    const int t = s_threshold, take_at = s_take_at;
    const bool all = (take_at == 0);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    for (int tile = 0; tile < span; tile += blockDim.x) {
        const int i = tile + threadIdx.x;
        const unsigned int c = (i < span) ? hist[i] : 0u;
        const bool above = all ? (c >= 1) : ((int)c > t);
        const bool at = !all && ((int)c == t);
        if (above) {
            int slot = atomicAdd(&s_n_out, 1);
            out_pep[(long long)task * k + slot] = lo + i;
            out_cnt[(long long)task * k + slot] = (int)c;
        }
        // ordered scan of the "at threshold" flags: lower peptide index first
        const unsigned int ballot = __ballot_sync(0xffffffffu, at);
        if (lane == 0) warp_sums[warp] = __popc(ballot);
        __syncthreads();
        int before = 0;
        for (int w = 0; w < warp; ++w) before += warp_sums[w];
        const int rank = s_base + before + __popc(ballot & ((1u << lane) - 1u));
        if (at && rank < take_at) {
            int slot = atomicAdd(&s_n_out, 1);
            out_pep[(long long)task * k + slot] = lo + i;
            out_cnt[(long long)task * k + slot] = (int)c;
        }
        __syncthreads();
        if (threadIdx.x == 0) { int tot = 0; for (int w = 0; w < n_warps; ++w) tot += warp_sums[w]; s_base += tot; }
        __syncthreads();
    }
    for (int slot = s_n_out + threadIdx.x; slot < k; slot += blockDim.x) {
        out_pep[(long long)task * k + slot] = -1;
        out_cnt[(long long)task * k + slot] = 0;
    }
    // order the outputs by (count desc, peptide asc), as the merge would: a query that fits one
    // chunk then needs no merge. Keys reuse the histogram: (MAX_COUNT - count) << CHUNK_BITS | offset.
    __syncthreads();
    const int n_out = s_n_out;
    for (int i = threadIdx.x; i < n_out; i += blockDim.x) {
        const long long p = out_pep[(long long)task * k + i];
        const int c = out_cnt[(long long)task * k + i];
        hist[i] = ((unsigned int)(MAX_COUNT - c) << CHUNK_BITS) | (unsigned int)(p - lo);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n_out; i += blockDim.x) {
        const unsigned int key = hist[i];
        int rank = 0;
        for (int j = 0; j < n_out; ++j) rank += hist[j] < key;  // keys are distinct (one per peptide)
        out_pep[(long long)task * k + rank] = lo + (long long)(key & ((1u << CHUNK_BITS) - 1u));
        out_cnt[(long long)task * k + rank] = MAX_COUNT - (int)(key >> CHUNK_BITS);
    }
}

extern "C" __global__ void match(
    int n_pairs, int k, const long long* __restrict__ cand,
    const long long* __restrict__ q_spec, const long long* __restrict__ q_zmax,
    const double* __restrict__ peaks_mz, const double* __restrict__ peaks_int, const double* __restrict__ cum_int,
    int width, const int* __restrict__ n_peaks, const double* __restrict__ spec_sum, const double* __restrict__ spec_sq,
    const unsigned int* __restrict__ form_base, const short* __restrict__ mod_pos,
    const unsigned char* __restrict__ mod_id,
    int n_mods, const double* __restrict__ mod_delta,
    const unsigned char* __restrict__ residues, const long long* __restrict__ base_off,
    const double* __restrict__ residue_mass, double n_fixed, double c_fixed,
    double frag_tol, int frag_ppm, double* __restrict__ out)
{
    // one thread per (query, slot) of cand [Q, k]; out is [10, Q, k] in STATS order
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_pairs) return;
    const long long pep = cand[t];
    if (pep < 0) {  // no candidate: the worst score, zero statistics
        out[t] = NEG_INF; out[n_pairs + t] = NEG_INF; out[2 * n_pairs + t] = NEG_INF;
        for (int f = 3; f < 10; ++f) out[(long long)f * n_pairs + t] = 0.0;
        return;
    }
    const long long q = t / k;
    const long long spec = q_spec[q];
    const int zmax = (int)q_zmax[q];
    const long long b = form_base[pep];
    const long long off = base_off[b];
    const int L = (int)(base_off[b + 1] - off);
    const int npk = n_peaks[spec];
    const double* mzs = peaks_mz + spec * width;
    const double* ins = peaks_int + spec * width;
    const double* cum = cum_int + spec * (width + 1);

    // residue masses in the NumPy reference's order of additions
    double res[64];
    for (int i = 0; i < L; ++i) {
        double r = residue_mass[residues[off + i]];
        if (i == 0) r += n_fixed;
        if (i == L - 1) r += c_fixed;
        res[i] = r;
    }
    for (int m = 0; m < n_mods; ++m) {
        const int p = mod_pos[pep * n_mods + m];
        if (p >= 0) res[p] += mod_delta[mod_id[pep * n_mods + m]];
    }
    double total = 0.0;
    for (int i = 0; i < L - 1; ++i) total += res[i];
    total += res[L - 1];

    unsigned int used[MAX_WORDS];
    for (int w = 0; w < MAX_WORDS; ++w) used[w] = 0u;
    int nb = 0, ny = 0, n_theo = 0, run_b = 0, run_y = 0, best_run = 0;
    double summed = 0.0, xcorr = 0.0, explained = 0.0, err_sum = 0.0, sum_b = 0.0, sum_y = 0.0;
    int n_matched = 0;
    double prefix = 0.0;
    for (int i = 0; i < L - 1; ++i) {
        prefix += res[i];
        const double bn = prefix;
        const double yn = total - prefix + H2O;  // y(L-1-i)
        bool hb = false, hy = false;
        for (int series = 0; series < 2; ++series) {
            const double neutral = series == 0 ? bn : yn;
            for (int c = 1; c <= zmax; ++c) {
                const double mz = (neutral + c * PROTON) / c;
                const double tol = frag_ppm ? mz * frag_tol * 1e-6 : frag_tol;
                ++n_theo;
                int l = 0, h = npk;  // first peak >= mz - tol
                while (l < h) { int m = (l + h) >> 1; if (mzs[m] < mz - tol) l = m + 1; else h = m; }
                int best = -1; double best_i = -1.0;
                for (int j = l; j < npk && mzs[j] <= mz + tol; ++j) {
                    if (ins[j] > best_i) { best_i = ins[j]; best = j; }
                }
                double inten = 0.0;
                if (best >= 0) {
                    inten = ins[best];
                    summed += inten;
                    if (series == 0) sum_b += inten; else sum_y += inten;
                    err_sum += fabs(mzs[best] - mz) / tol;
                    ++n_matched;
                    if (series == 0) hb = true; else hy = true;
                    const unsigned int bit = 1u << (best & 31);
                    if (!(used[best >> 5] & bit)) { used[best >> 5] |= bit; explained += inten; }
                }
                l = 0; h = npk;  // xcorr background: peaks within +-XHALF
                while (l < h) { int m = (l + h) >> 1; if (mzs[m] < mz - XHALF) l = m + 1; else h = m; }
                const int wlo = l;
                l = wlo; h = npk;
                while (l < h) { int m = (l + h) >> 1; if (mzs[m] <= mz + XHALF) l = m + 1; else h = m; }
                xcorr += inten - (cum[l] - cum[wlo] - inten) / (2.0 * XHALF);
            }
        }
        nb += hb; ny += hy;
        run_b = hb ? run_b + 1 : 0;
        run_y = hy ? run_y + 1 : 0;
        if (run_b > best_run) best_run = run_b;
        if (run_y > best_run) best_run = run_y;
    }
    int distinct = 0;
    for (int w = 0; w < MAX_WORDS; ++w) distinct += __popc(used[w]);
    const double norm = sqrt(spec_sq[spec]) * sqrt((double)(n_theo > 1 ? n_theo : 1));
    const long long n = n_pairs;
    out[t] = lgamma(nb + 1.0) + lgamma(ny + 1.0) + log1p(100.0 * sum_b) + log1p(100.0 * sum_y);
    out[n + t] = summed / (norm > 1e-12 ? norm : 1e-12);
    out[2 * n + t] = xcorr;
    out[3 * n + t] = nb; out[4 * n + t] = ny; out[5 * n + t] = summed; out[6 * n + t] = distinct;
    out[7 * n + t] = explained / (spec_sum[spec] > 1e-12 ? spec_sum[spec] : 1e-12);
    out[8 * n + t] = best_run;
    out[9 * n + t] = n_matched > 0 ? err_sum / n_matched : 1.0;
}
"""


def source() -> str:
    """The CUDA source with this module's constants filled in."""
    assert CHUNK & (CHUNK - 1) == 0 and (MAX_COUNT << (CHUNK.bit_length() - 1)) < 2**32
    return _SOURCE % {
        "chunk": CHUNK, "chunk_bits": CHUNK.bit_length() - 1, "max_count": MAX_COUNT, "max_words": MAX_WIDTH // 32,
        "max_peaks": MAX_WIDTH,
        "c13": C13_DELTA, "proton": PROTON, "h2o": H2O, "xhalf": XCORR_HALF_WINDOW,
    }  # fmt: skip
