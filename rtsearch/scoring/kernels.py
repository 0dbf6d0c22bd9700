"""CuPy kernels for the two hot steps, computing exactly what the NumPy references do.

- ``count_select``: `rtsearch.scoring.candidates.candidates_numpy` — one
  CUDA block per (query, chunk of its peptide window): matched-fragment
  counts in a shared-memory histogram, isotope-window mask, then the ``k``
  best by (count desc, peptide asc) chosen with a count histogram and an
  ordered block scan. A final 64-bit key sort merges the chunks of a query.
- ``match``: `rtsearch.scoring.matching.match_numpy` — one thread per
  (query, candidate): b/y ions built from residue masses in the same order
  of float64 additions, matched to the most intense peak in tolerance.

Parity with NumPy is tested in ``tests/gpu``. Nothing here runs without CuPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rtsearch.config import SearchConfig
from rtsearch.index.database import PeptideIndex
from rtsearch.scoring.candidates import Queries
from rtsearch.scoring.matching import STATS, XCORR_HALF_WINDOW, MatchStats, fragment_charges
from rtsearch.spectrum import PeakBatch
from rtsearch.types import C13_DELTA, H2O, PROTON

# the match kernel writes its outputs in STATS order; the stacked result is read back as MatchStats
assert tuple(MatchStats.__dataclass_fields__) == STATS

CHUNK = 8192  # peptides per block histogram (32 KiB of shared memory)
MAX_COUNT = 1023  # counts are capped here for the selection histogram
MAX_WIDTH = 256  # peaks per spectrum the matcher's bitmask holds
MAX_LENGTH = 64  # residues per peptide the matcher's local array holds

_SOURCE = r"""
#define CHUNK %(chunk)d
#define MAX_COUNT %(max_count)d
#define MAX_WORDS %(max_words)d
#define C13 %(c13).17g
#define PROTON %(proton).17g
#define H2O %(h2o).17g
#define XHALF %(xhalf).17g

__device__ __forceinline__ long long lower_bound_u32(const unsigned int* a, long long lo, long long hi,
                                                     unsigned int v) {
    while (lo < hi) { long long m = (lo + hi) >> 1; if (a[m] < v) lo = m + 1; else hi = m; }
    return lo;
}

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
    __shared__ int s_threshold, s_take_at, s_n_out, s_base;
    const int task = blockIdx.x;
    const long long q = t_query[task];
    const long long lo = t_lo[task], hi = t_hi[task];
    const int span = (int)(hi - lo);
    const long long spec = q_spec[q];
    for (int i = threadIdx.x; i < span; i += blockDim.x) hist[i] = 0;
    for (int i = threadIdx.x; i <= MAX_COUNT; i += blockDim.x) count_hist[i] = 0;
    if (threadIdx.x == 0) { s_n_out = 0; s_base = 0; }
    __syncthreads();

    const int npk = n_peaks[spec];
    for (int p = threadIdx.x; p < npk; p += blockDim.x) {
        const double pm = peaks_mz[spec * width + p];
        const double tol = frag_ppm ? pm * frag_tol * 1e-6 : frag_tol;
        const double a = pm - tol, b = pm + tol;
        int l = 0, h = n_buckets;                 // first bucket with min >= a
        while (l < h) { int m = (l + h) >> 1; if ((double)bucket_min[m] < a) l = m + 1; else h = m; }
        int b0 = l - 1; if (b0 < 0) b0 = 0;
        l = 0; h = n_buckets;                     // first bucket with min > b
        while (l < h) { int m = (l + h) >> 1; if ((double)bucket_min[m] <= b) l = m + 1; else h = m; }
        const int b1 = l;
        for (int bk = b0; bk < b1; ++bk) {
            const long long start = (long long)bk * bucket_size;
            long long end = start + bucket_size; if (end > n_frag) end = n_frag;
            const long long s = lower_bound_u32(frag_pep, start, end, (unsigned int)lo);
            const long long e = lower_bound_u32(frag_pep, s, end, (unsigned int)hi);
            for (long long f = s; f < e; ++f) {
                if (fabs((double)frag_mz[f] - pm) <= tol) atomicAdd(&hist[frag_pep[f] - (unsigned int)lo], 1u);
            }
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
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int acc = 0, t = 0, take = 0;
        for (int c = MAX_COUNT; c >= 1; --c) {
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
}

extern "C" __global__ void match(
    int n_pairs, const long long* __restrict__ pair_q, const long long* __restrict__ pair_pep,
    const long long* __restrict__ q_spec, const long long* __restrict__ q_zmax,
    const double* __restrict__ peaks_mz, const double* __restrict__ peaks_int, const double* __restrict__ cum_int,
    int width, const int* __restrict__ n_peaks, const double* __restrict__ spec_sum, const double* __restrict__ spec_sq,
    const unsigned int* __restrict__ form_base, const short* __restrict__ mod_pos,
    const unsigned char* __restrict__ mod_id,
    int n_mods, const double* __restrict__ mod_delta,
    const unsigned char* __restrict__ residues, const long long* __restrict__ base_off,
    const double* __restrict__ residue_mass, double n_fixed, double c_fixed,
    double frag_tol, int frag_ppm,
    double* __restrict__ o_hyper, double* __restrict__ o_dot, double* __restrict__ o_xcorr,
    double* __restrict__ o_nb, double* __restrict__ o_ny, double* __restrict__ o_summed,
    double* __restrict__ o_peaks, double* __restrict__ o_explained, double* __restrict__ o_run,
    double* __restrict__ o_ferr)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_pairs) return;
    const long long q = pair_q[t], pep = pair_pep[t];
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
    o_hyper[t] = lgamma(nb + 1.0) + lgamma(ny + 1.0) + log1p(100.0 * sum_b) + log1p(100.0 * sum_y);
    o_dot[t] = summed / (norm > 1e-12 ? norm : 1e-12);
    o_xcorr[t] = xcorr;
    o_nb[t] = nb; o_ny[t] = ny; o_summed[t] = summed; o_peaks[t] = distinct;
    o_explained[t] = explained / (spec_sum[spec] > 1e-12 ? spec_sum[spec] : 1e-12);
    o_run[t] = best_run;
    o_ferr[t] = n_matched > 0 ? err_sum / n_matched : 1.0;
}
"""


class GpuIndex:
    """The index's arrays on the GPU and the two compiled kernels."""

    def __init__(self, index: PeptideIndex, cp: Any) -> None:
        if index.params.max_length > MAX_LENGTH:
            from rtsearch.errors import BackendError

            raise BackendError(f"the GPU backend scores peptides up to {MAX_LENGTH} residues (max_length is "
                               f"{index.params.max_length}); use --backend numpy")
        self.cp = cp
        self.index = index
        f = index.fragments
        up = cp.asarray
        self.frag_mz = up(np.ascontiguousarray(f.mz))
        self.frag_pep = up(np.ascontiguousarray(f.peptide))
        self.bucket_min = up(np.ascontiguousarray(f.bucket_min_mz))
        self.bucket_size = f.bucket_size
        self.pep_mass = up(np.ascontiguousarray(index.mass))
        self.form_base = up(np.ascontiguousarray(index.forms.base))
        self.n_mods = int(index.forms.mod_pos.shape[1])
        self.mod_pos = up(np.ascontiguousarray(index.forms.mod_pos, dtype=np.int16))
        self.mod_id = up(np.ascontiguousarray(index.forms.mod_id, dtype=np.uint8))
        self.mod_delta = up(np.array([m.delta for m in index.mods.variable] or [0.0], dtype=np.float64))
        self.residues = up(np.ascontiguousarray(index.bases.residues))
        self.base_off = up(np.ascontiguousarray(index.bases.offsets, dtype=np.int64))
        self.residue_mass = up(index.residue_mass)
        self.n_fixed, self.c_fixed = index.mods.terminal_fixed()
        src = _SOURCE % {
            "chunk": CHUNK, "max_count": MAX_COUNT, "max_words": MAX_WIDTH // 32,
            "c13": C13_DELTA, "proton": PROTON, "h2o": H2O, "xhalf": XCORR_HALF_WINDOW,
        }  # fmt: skip
        module = cp.RawModule(code=src, options=("--std=c++17",))
        self._count = module.get_function("count_select")
        self._match = module.get_function("match")
        self.nbytes = int(
            sum(a.nbytes for a in (
                self.frag_mz, self.frag_pep, self.bucket_min, self.pep_mass, self.form_base, self.mod_pos,
                self.mod_id, self.residues, self.base_off,
            ))
        )  # fmt: skip

    def candidates(self, peaks: PeakBatch, queries: Queries, cfg: SearchConfig) -> tuple[Any, Any]:
        """``(peptide [Q, k], count [Q, k])`` on the device, as `candidates_numpy` computes them."""
        cp = self.cp
        k = cfg.candidates
        n_q = len(queries)
        span = queries.hi - queries.lo
        n_chunks = (span + CHUNK - 1) // CHUNK
        t_query = np.repeat(np.arange(n_q, dtype=np.int64), n_chunks)
        first = np.repeat(np.cumsum(n_chunks) - n_chunks, n_chunks)
        t_lo = queries.lo[t_query] + (np.arange(t_query.shape[0]) - first) * CHUNK
        t_hi = np.minimum(t_lo + CHUNK, queries.hi[t_query])
        n_tasks = int(t_query.shape[0])
        out_pep = cp.full((n_q, k), -1, dtype=cp.int64)
        out_cnt = cp.zeros((n_q, k), dtype=cp.int32)
        if n_tasks == 0:
            return out_pep, out_cnt
        tp = cp.empty((n_tasks, k), dtype=cp.int64)
        tc = cp.empty((n_tasks, k), dtype=cp.int32)
        pt, ft = cfg.precursor_tolerance, cfg.fragment_tolerance
        iso = cp.asarray(np.array(cfg.isotope_errors, dtype=np.int32))
        self._count(
            (n_tasks,), (256,),
            (self.frag_mz, self.frag_pep, self.bucket_min, np.int32(self.bucket_min.shape[0]),
             np.int64(self.frag_mz.shape[0]), np.int32(self.bucket_size),
             peaks.mz, np.int32(peaks.mz.shape[1]), peaks.n_peaks,
             cp.asarray(t_query), cp.asarray(t_lo), cp.asarray(t_hi),
             cp.asarray(queries.spectrum), cp.asarray(queries.mass), self.pep_mass,
             np.float64(ft.value), np.int32(ft.unit == "ppm"), np.float64(pt.value), np.int32(pt.unit == "ppm"),
             iso, np.int32(iso.shape[0]), np.int32(k), np.int32(cfg.min_matched_peaks), tp, tc),
        )  # fmt: skip
        # merge the chunks of each query: sort by (query, count desc, peptide asc), keep k
        d_tq = cp.asarray(t_query)
        valid = tp >= 0
        qq = cp.broadcast_to(d_tq[:, None], tp.shape)[valid]
        pp, cc = tp[valid], tc[valid]
        key = (qq.astype(cp.uint64) << cp.uint64(42)) | ((MAX_COUNT - cc).astype(cp.uint64) << cp.uint64(32))
        key |= pp.astype(cp.uint64)
        order = cp.argsort(key)
        qq, pp, cc = qq[order], pp[order], cc[order]
        start = cp.searchsorted(qq, cp.arange(n_q), side="left")
        rank = cp.arange(qq.shape[0]) - start[qq]
        sel = rank < k
        out_pep[qq[sel], rank[sel]] = pp[sel]
        out_cnt[qq[sel], rank[sel]] = cc[sel]
        return out_pep, out_cnt

    def match(self, peaks: PeakBatch, queries: Queries, cand: Any, cfg: SearchConfig) -> MatchStats:
        """Full scores of every candidate, as `match_numpy` computes them (arrays stay on the device)."""
        return MatchStats(*self._match_stacked(peaks, queries, cand, cfg))

    def _match_stacked(self, peaks: PeakBatch, queries: Queries, cand: Any, cfg: SearchConfig) -> Any:
        """The `MatchStats` fields stacked into one ``[len(STATS), Q, K]`` device array.

        One allocation, one scatter and (in `score`) one copy back, instead of one of each
        per statistic: small batches are dominated by such per-call overheads.
        """
        cp = self.cp
        n_q, k = cand.shape
        out = cp.zeros((len(STATS), n_q, k), dtype=cp.float64)
        out[:3] = -cp.inf  # hyperscore, dot, xcorr: no candidate is the worst score
        valid = cand >= 0
        pq, pk = cp.nonzero(valid)
        peps = cand[pq, pk]
        n = int(peps.shape[0])
        if n == 0:
            return out
        inten = peaks.intensity.astype(cp.float64)
        width = int(peaks.mz.shape[1])
        cum = cp.zeros((inten.shape[0], width + 1), dtype=cp.float64)
        cum[:, 1:] = cp.cumsum(inten, axis=1)
        spec_sum = inten.sum(axis=1)
        spec_sq = (inten**2).sum(axis=1)
        zmax = cp.asarray(fragment_charges(queries.charge, cfg.max_fragment_charge).astype(np.int64))
        res = cp.empty((len(STATS), n), dtype=cp.float64)  # the kernel writes one row per statistic
        ft = cfg.fragment_tolerance
        self._match(
            ((n + 127) // 128,), (128,),
            (np.int32(n), pq.astype(cp.int64), peps.astype(cp.int64), cp.asarray(queries.spectrum), zmax,
             peaks.mz, inten, cum, np.int32(width), peaks.n_peaks, spec_sum, spec_sq,
             self.form_base, self.mod_pos, self.mod_id, np.int32(self.n_mods), self.mod_delta,
             self.residues, self.base_off, self.residue_mass, np.float64(self.n_fixed), np.float64(self.c_fixed),
             np.float64(ft.value), np.int32(ft.unit == "ppm"), *res),
        )  # fmt: skip
        out[:, pq, pk] = res
        return out

    def score(
        self, peaks: PeakBatch, queries: Queries, cfg: SearchConfig, lap: Any = None
    ) -> tuple[np.ndarray, np.ndarray, MatchStats]:
        """Candidates and full scores, copied back to the host (``lap(stage)`` marks steps)."""
        if int(peaks.mz.shape[1]) > MAX_WIDTH:
            raise ValueError(f"at most {MAX_WIDTH} peaks per spectrum on the GPU")
        lap = lap or (lambda stage: None)
        cand, prelim = self.candidates(peaks, queries, cfg)
        lap("gpu candidates")
        stacked = self._match_stacked(peaks, queries, cand, cfg)
        lap("gpu match")
        host = MatchStats(*self.cp.asnumpy(stacked))
        out = self.cp.asnumpy(cand), self.cp.asnumpy(prelim), host
        lap("device->host")
        return out
