"""Spectral library scoring on the GPU: a batch of queries against a library held on the device.

`GpuLibrary.score` computes what `rtsearch.scoring.library.scores.score_library` computes, for a
whole batch at once (kernels in `rtsearch.scoring.library.kernels`):

1. one host-to-device copy of the batch's peaks and windows (`library_queries`);
2. ``preprocess`` turns every spectrum into a dense, unit-length row over the library's
   m/z bins (``Q [S, n_bins]``, float32);
3. narrow windows (ppm or a few Da): ``narrow`` walks each query's entries, a warp per
   query. Open windows (hundreds of Da, thousands of candidates per query): the dots are
   one matrix product per chunk of entries, ``Q @ L[c0:c1].T`` in half precision on the
   tensor cores against a dense copy of the library made on first use (FastPaSS,
   Baumgardner et al. 2011, J. Proteome Res. 10:2882); ``open_reduce`` keeps each query's
   best entry and best entry of another peptide, which ``pairs`` then rescores exactly;
4. one copy back; the F-value is computed on the host (`f_value`).

Open search ranks by half-precision dots (about 1e-3 from the exact ones), so where two
entries are that close it may pick the other; the scores it reports are exact.

Memory: the sparse peaks (``P`` peaks, ``E`` entries) take ``8 P + 21 E`` bytes; the dense
copy for open search ``2 E * n_bins`` (`GpuLibrary.device_bytes`). A library whose dense copy
would not fit (`DENSE_SHARE` of the free memory, or ``dense_limit_bytes``) is searched by the
walk in open windows too: slower, the same (exact) scores.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from rtsearch.config import LibraryMode
from rtsearch.library.store import SpectralLibrary
from rtsearch.scoring.database.gpu import Upload, Uploaded
from rtsearch.scoring.library.kernels import OPEN_BLOCK, source
from rtsearch.scoring.library.scores import LibraryMatches, LibraryQueries, f_value, library_queries
from rtsearch.types import Spectrum, Tolerance

WARPS_PER_BLOCK = 8
PREPROCESS_THREADS = 128
# queries averaging more entries in their m/z range than this go through the matrix product: on an
# H100 with a 1,000,000-entry library the walk costs 3.4-5.0 us + 0.57-0.84 ns per entry per query,
# the product 8-15 us per query; crossovers near 7,000 and 12,000 in two runs (docs/history/RESULTS.md)
OPEN_MIN_CANDIDATES = 10_000
OPEN_CHUNK_BYTES = 256 << 20  # bytes of half dots per chunk of the matrix product
DENSE_SHARE = 0.6  # the dense copy may take this share of the device memory free when it is made
log = logging.getLogger(__name__)


class GpuLibrary:
    """A `SpectralLibrary`'s arrays on the GPU and the compiled kernels (see the module docstring)."""

    def __init__(self, lib: SpectralLibrary, cp: Any, *, dense_limit_bytes: int | None = None) -> None:
        """``dense_limit_bytes``: the most the dense copy for open search may take (default: `DENSE_SHARE`
        of the free device memory); a library that needs more is searched by walking its windows."""
        self.cp = cp
        self.dense_limit_bytes = dense_limit_bytes
        self.lib = lib
        self.n_bins = int(lib.peak_bins.max()) + 1 if lib.peak_bins.size else 1
        up = cp.asarray
        self.mz = up(np.ascontiguousarray(lib.precursor_mz, dtype=np.float64))
        self.z = up(np.ascontiguousarray(lib.charge, dtype=np.int8))
        self.pid = up(np.ascontiguousarray(lib.sequence))
        self.off = up(np.ascontiguousarray(lib.peak_offsets, dtype=np.int64))
        self.bins = up(np.ascontiguousarray(lib.peak_bins, dtype=np.int32))
        self.vals = up(np.ascontiguousarray(lib.peak_values, dtype=np.float32))
        module = cp.RawModule(code=source(), options=("--std=c++17", "--fmad=false"))
        self._preprocess = module.get_function("preprocess")
        self._narrow = module.get_function("narrow")
        self._open_reduce = module.get_function("open_reduce")
        self._pairs = module.get_function("pairs")
        self.dense: Any = None  # [E, K] half, made by the first open search
        self.dense_fits: bool | None = None  # known once an open search asked for it
        self._dense_lock = threading.Lock()  # engine workers warm up at once: one of them makes it
        cp.cuda.get_current_stream().synchronize()

    def device_bytes(self) -> dict[str, int]:
        """Bytes on the device: the sparse library, and the dense copy (0 until an open search)."""
        sparse = sum(int(a.nbytes) for a in (self.mz, self.z, self.pid, self.off, self.bins, self.vals))
        return {"sparse": sparse, "dense": int(self.dense.nbytes) if self.dense is not None else 0}

    # ---------------------------------------------------------------- batch

    def score(
        self, spectra: Sequence[Spectrum], tolerance: Tolerance, *, isotope_errors: Sequence[int] = (0,),
        mode: LibraryMode = "auto",
    ) -> LibraryMatches:  # fmt: skip
        """Best entry and SpectraST scores of each spectrum, as `score_library` gives them.

        ``mode``: ``"narrow"`` (a warp walks each query's window), ``"open"`` (matrix product)
        or ``"auto"`` (open when the batch averages over `OPEN_MIN_CANDIDATES` per query).
        """
        cp = self.cp
        q = library_queries(self.lib, spectra, tolerance, isotope_errors)
        n = len(spectra)
        if n == 0:
            return LibraryMatches(*(np.zeros(0, t) for t in (np.int64,) + (np.float64,) * 4 + (np.int64,) * 2))
        if mode == "auto":
            mode = "open" if float((q.b - q.a).mean()) > OPEN_MIN_CANDIDATES else "narrow"
        if mode == "open" and not self._dense_fits():
            mode = "narrow"
        Q, d = self._rows(spectra, q)
        if mode == "narrow":
            out_e = cp.empty(n, dtype=cp.int64)
            out = cp.empty((5, n), dtype=cp.float64)
            threads = 32 * WARPS_PER_BLOCK
            self._narrow(
                ((n + WARPS_PER_BLOCK - 1) // WARPS_PER_BLOCK,), (threads,),
                (np.int32(n), Q, np.int32(self.n_bins), *_windows(d, q), self.mz, self.z, self.pid, self.off, self.bins,
                 self.vals, out_e, out),
            )  # fmt: skip
            entry, stats = cp.asnumpy(out_e), cp.asnumpy(out)
            dot, sq, second, matched, cands = stats
        else:
            entry, dot, sq, second, matched, cands = self._open(Q, d, q, n)
        return _matches(entry, dot, sq, second, matched, cands)

    def _rows(self, spectra: Sequence[Spectrum], q: LibraryQueries) -> tuple[Any, Uploaded]:
        """Upload the batch; its preprocessed dense rows ``Q`` and the device copies of ``q``."""
        cp = self.cp
        n = len(spectra)
        counts = np.fromiter((sp.mz.shape[0] for sp in spectra), dtype=np.int64, count=n)
        start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=start[1:])
        mz = np.concatenate([sp.mz for sp in spectra]).astype(np.float64, copy=False)
        inten = np.concatenate([sp.intensity for sp in spectra]).astype(np.float64, copy=False)
        up = Upload()  # the batch in one host-to-device copy (`rtsearch.scoring.database.gpu.Upload`)
        for name, a in (("mz", mz), ("inten", inten), ("start", start), ("prec", q.precursor_mz),
                        ("width", q.width), ("a", q.a), ("b", q.b), ("zmask", q.zmask),
                        ("iso", q.iso if q.iso.size else np.zeros(1, np.int32))):  # fmt: skip
            up.add(name, a)
        d = up.send(cp.asarray)
        p = self.lib.params
        Q = cp.zeros((n, self.n_bins), dtype=cp.float32)
        w = cp.empty(max(int(start[-1]), 1), dtype=cp.float64)
        self._preprocess(
            (n,), (PREPROCESS_THREADS,),
            (d.ptr("mz"), d.ptr("inten"), d.ptr("start"), d.ptr("prec"), np.float64(p.precursor_removal_da),
             np.float64(p.bin_width), np.int32(p.top_peaks), np.int32(self.n_bins), w, Q),
        )  # fmt: skip
        return Q, d

    # ---------------------------------------------------------------- open search

    def dense_bytes(self) -> int:
        """Bytes the dense copy takes: entries x bins (rounded up to 64) x 2."""
        return (int(self.off.shape[0]) - 1) * (-(-self.n_bins // 64) * 64) * 2

    def _dense_fits(self) -> bool:
        """Whether the dense copy is (or can be) on the device; said once in the log when not."""
        if self.dense_fits is None:
            limit = self.dense_limit_bytes
            if limit is None:
                limit = int(DENSE_SHARE * self.cp.cuda.Device().mem_info[0])
            self.dense_fits = self.dense is not None or self.dense_bytes() <= limit
            if not self.dense_fits:
                log.warning("the library's dense copy for open search would take %.1f GB (limit %.1f GB): open "
                            "windows are walked entry by entry instead (slower, same scores)",
                            self.dense_bytes() / 1e9, limit / 1e9)  # fmt: skip
        return self.dense_fits

    def _dense(self) -> Any:
        """The library as a dense half matrix ``[E, K]`` (K: bins rounded up to 64), made once."""
        with self._dense_lock:
            return self._make_dense()

    def _make_dense(self) -> Any:
        if self.dense is None:
            cp = self.cp
            k = -(-self.n_bins // 64) * 64
            n_e = int(self.off.shape[0]) - 1
            dense = cp.zeros((n_e, k), dtype=cp.float16)
            rows = cp.searchsorted(self.off, cp.arange(int(self.bins.shape[0]), dtype=cp.int64), side="right") - 1
            dense[rows, self.bins] = self.vals.astype(cp.float16)
            del rows
            self.dense = dense
            cp.cuda.get_current_stream().synchronize()  # other workers' streams read it next
            cp.get_default_memory_pool().free_all_blocks()  # the build's temporaries (2 x 8 bytes a peak)
        return self.dense

    def _open(self, Q: Any, d: Uploaded, q: LibraryQueries, n: int) -> tuple[np.ndarray, ...]:
        cp = self.cp
        lib = self._dense()
        k = int(lib.shape[1])
        Qh = cp.zeros((n, k), dtype=cp.float16)
        Qh[:, : self.n_bins] = Q.astype(cp.float16)
        v1, v2 = cp.zeros(n, cp.float32), cp.zeros(n, cp.float32)
        e1, e2 = cp.full(n, -1, cp.int64), cp.full(n, -1, cp.int64)
        p1, n_cand = cp.full(n, -1, cp.int32), cp.zeros(n, cp.int64)
        live = q.b > q.a
        if live.any():
            lo, hi = int(q.a[live].min()), int(q.b[live].max())
            chunk = max(1024, OPEN_CHUNK_BYTES // (2 * n) // 1024 * 1024)
            for c0 in range(lo, hi, chunk):
                c1 = min(c0 + chunk, hi)
                dots = cp.matmul(Qh, lib[c0:c1].T)  # [n, c1 - c0] half
                self._open_reduce(
                    (n,), (OPEN_BLOCK,),
                    (np.int32(n), dots, np.int64(c0), np.int64(c1), *_windows(d, q), self.mz, self.z, self.pid,
                     v1, v2, e1, e2, p1, n_cand),
                )  # fmt: skip
        pq = cp.concatenate([cp.arange(n, dtype=cp.int64)] * 2)
        pe = cp.concatenate([e1, e2])
        out = cp.empty((3, 2 * n), dtype=cp.float64)
        self._pairs(
            ((2 * n + WARPS_PER_BLOCK - 1) // WARPS_PER_BLOCK,), (32 * WARPS_PER_BLOCK,),
            (np.int32(2 * n), pq, pe, Q, np.int32(self.n_bins), self.off, self.bins, self.vals, out),
        )  # fmt: skip
        host = cp.asnumpy(out)
        return (cp.asnumpy(e1), host[0, :n], host[1, :n], host[0, n:], host[2, :n],
                cp.asnumpy(n_cand).astype(np.float64))  # fmt: skip


def _windows(d: Uploaded, q: LibraryQueries) -> tuple[Any, ...]:
    """The window arguments ``narrow`` and ``open_reduce`` share, in their order."""
    return (d.ptr("a"), d.ptr("b"), d.ptr("prec"), d.ptr("width"), d.ptr("zmask"), d.ptr("iso"), np.int32(q.iso.size),
            np.int32(q.by_mass))  # fmt: skip


def _matches(entry: np.ndarray, dot: np.ndarray, sq: np.ndarray, second: np.ndarray, matched: np.ndarray,
             cands: np.ndarray) -> LibraryMatches:  # fmt: skip
    hit = entry >= 0
    dot = np.where(hit, dot, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        bias = np.where(hit & (dot > 0), np.sqrt(np.maximum(sq, 0.0)) / np.where(dot > 0, dot, 1.0), 0.0)
    delta = np.where(hit, dot - second, 0.0)
    cand = np.where(hit, cands, 0).astype(np.int64)
    f = np.full(entry.shape[0], -1e-5)
    f[hit] = f_value(dot[hit], delta[hit], bias[hit], cand[hit])
    return LibraryMatches(entry.astype(np.int64), dot, bias, delta, f, cand,
                          np.where(hit, matched, 0).astype(np.int64))  # fmt: skip
