"""Database search's spectrum preprocessing as one CUDA kernel (`rtsearch.spectrum.preprocess` + row sums).

On the device, `rtsearch.spectrum.preprocess` is some forty CuPy calls (padding,
masks, two row sorts, the isotope search) and the matcher's row sums a few more:
tens of microseconds of host time each, whatever the batch size. ``preprocess_rows``
does the same in one launch, one block per spectrum, from the packed peaks
(`rtsearch.spectrum.pack`):

1. kept peaks: m/z at least ``min_mz``, outside the precursor window, positive, finite;
2. with ``deiso_tol`` > 0, `rtsearch.spectrum.isotope_peaks`: a kept peak is dropped when
   the most intense of the first three kept peaks within ``deiso_tol`` of m - C13/z
   (z = 1, 2) is more intense; the same float64 expressions, row offset included;
3. `rtsearch.spectrum.top_n`: the ``W`` most intense kept peaks, ties by position (ranks
   counted, or above 512 peaks the threshold found by bisection on the float bits), written
   in m/z order (equal m/z: by rank, as the stable sorts order them);
4. `rtsearch.spectrum.transform_intensity` in float32 (square root, divided by the row's
   largest), then the row sums `rtsearch.scoring.database.gpu.row_sums` computes: float64
   intensities, their running sum from 0 (in order, as NumPy's cumsum), total and squares.

Parity with the NumPy path: ``tests/gpu/test_parity.py`` (whole engine) and
``tests/gpu/test_preprocess_kernel.py`` (rows and sums).
"""

from __future__ import annotations

from rtsearch.scoring.database.kernels import MAX_WIDTH
from rtsearch.spectrum import _ROW_SPAN
from rtsearch.types import C13_DELTA

MAX_PEAKS = 4096  # peaks per packed spectrum (`rtsearch.spectrum.pack`'s max_width)
RANK_DIRECT_MAX = 512  # more kept peaks than this: the top-W threshold by bisection
THREADS = 128

_SOURCE = r"""
#define C13 %(c13).17g
#define ROW_SPAN %(row_span).17g
#define MAXP %(max_peaks)d
#define MAXW %(max_width)d
#define RANK_DIRECT_MAX %(rank_direct_max)d

__device__ __forceinline__ int block_count(int c, int* red) {
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = c;
    __syncthreads();
    int t = 0;
    for (int i = 0; i < (int)(blockDim.x >> 5); ++i) t += red[i];
    return t;
}

extern "C" __global__ void preprocess_rows(
    const double* __restrict__ mz, const float* __restrict__ inten, const long long* __restrict__ start,
    const double* __restrict__ prec, double min_mz, double removal, double deiso_tol, int W,
    double* __restrict__ out_mz, double* __restrict__ out_int, double* __restrict__ cum,
    double* __restrict__ total, double* __restrict__ sq, int* __restrict__ n_out)
{
    __shared__ unsigned char keep[MAXP], iso[MAXP], chosen[MAXP];
    __shared__ int src[MAXW];
    __shared__ int red[32];
    const int s = blockIdx.x;
    const long long a = start[s];
    const int n = (int)(start[s + 1] - a);
    const double pm = prec[s];
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const double m = mz[a + i];
        keep[i] = (m >= min_mz) && !(fabs(m - pm) <= removal) && (inten[a + i] > 0.0f) && isfinite(m);
        iso[i] = 0;
        chosen[i] = 0;
    }
    __syncthreads();
    if (deiso_tol > 0.0) {
        const double off = (double)s * ROW_SPAN;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            if (!keep[i]) continue;
            for (int z = 1; z <= 2; ++z) {
                const double target = mz[a + i] + off - C13 / z;
                const double lo = target - deiso_tol, hi = target + deiso_tol;
                int l = 0, h = n;   // first peak with m/z + offset >= lo (m/z ascending)
                while (l < h) { const int mid = (l + h) >> 1; if (mz[a + mid] + off < lo) l = mid + 1; else h = mid; }
                float best = 0.0f;
                int taken = 0;
                for (int j = l; j < n && taken < 3; ++j) {
                    if (mz[a + j] + off > hi) break;
                    if (!keep[j]) continue;   // not kept: the reference moved it to the row's end
                    best = fmaxf(best, inten[a + j]);
                    ++taken;
                }
                if (best > inten[a + i]) iso[i] = 1;
            }
        }
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += blockDim.x) if (iso[i]) keep[i] = 0;
        __syncthreads();
    }
    int c = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) c += keep[i];
    const int kept = block_count(c, red);
    if (kept <= W) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) chosen[i] = keep[i];
    } else if (n <= RANK_DIRECT_MAX) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            if (!keep[i]) continue;
            const float v = inten[a + i];
            int rank = 0;
            for (int j = 0; j < n && rank < W; ++j)
                if (keep[j] && (inten[a + j] > v || (inten[a + j] == v && j < i))) ++rank;
            chosen[i] = rank < W;
        }
    } else {
        // the W-th kept intensity t: bisection over the bits of positive floats (ordered as the values)
        unsigned int lo = 0u, hi = 0x7f800000u;   // count(>= lo) >= W > count(>= hi)
        while (hi - lo > 1u) {
            const unsigned int mid = lo + (hi - lo) / 2u;
            const float t = __uint_as_float(mid);
            int k = 0;
            for (int i = threadIdx.x; i < n; i += blockDim.x) k += keep[i] && inten[a + i] >= t;
            if (block_count(k, red) >= W) lo = mid; else hi = mid;
        }
        const float t = __uint_as_float(lo);
        int above = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            chosen[i] = keep[i] && inten[a + i] > t;
            above += chosen[i];
        }
        const int slots = W - block_count(above, red);
        __syncthreads();
        if (threadIdx.x == 0) {
            int left = slots;
            for (int i = 0; i < n && left > 0; ++i)
                if (keep[i] && inten[a + i] == t) { chosen[i] = 1; --left; }
        }
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    // one thread: the row in m/z order, equal m/z by rank (intensity desc, position asc), scaled, summed
    int k = 0;
    float top = 0.0f;
    for (int i = 0; i < n; ++i) {
        if (!chosen[i]) continue;
        int p = k++;
        const double m = mz[a + i];
        const float v = inten[a + i];
        while (p > 0 && mz[a + src[p - 1]] == m && inten[a + src[p - 1]] < v) { src[p] = src[p - 1]; --p; }
        src[p] = i;
        top = fmaxf(top, sqrtf(v));
    }
    const long long row = (long long)s * W;
    double run = 0.0, squares = 0.0;
    cum[(long long)s * (W + 1)] = 0.0;
    for (int p = 0; p < W; ++p) {
        double v = 0.0;
        if (p < k) {
            const float r = sqrtf(inten[a + src[p]]);
            v = (double)(top > 0.0f ? r / top : 0.0f);
            out_mz[row + p] = mz[a + src[p]];
        } else {
            out_mz[row + p] = __longlong_as_double(0x7ff0000000000000LL);
        }
        out_int[row + p] = v;
        run += v;
        squares += v * v;
        cum[(long long)s * (W + 1) + p + 1] = run;
    }
    total[s] = run;
    sq[s] = squares;
    n_out[s] = k;
}
"""


def source() -> str:
    """The CUDA source with this module's constants filled in."""
    return _SOURCE % {
        "c13": C13_DELTA, "row_span": _ROW_SPAN, "max_peaks": MAX_PEAKS, "max_width": MAX_WIDTH,
        "rank_direct_max": RANK_DIRECT_MAX,
    }  # fmt: skip
