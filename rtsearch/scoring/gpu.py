"""The engine's GPU side: the index on the device, a batch's peaks uploaded, the kernels launched.

A batch costs a fixed handful of device calls, whatever its size, because small
batches (the daemon at low rates scores spectra one by one) are dominated by
per-call overhead, not by arithmetic:

1. peaks: preprocessed on the host and uploaded as one float64 block (small
   batches; `GpuIndex.upload`) or preprocessed on the device (`GpuIndex.on_device`);
2. queries: one int64 block (tasks, windows, spectrum rows, fragment charges)
   and one float64 array (masses);
3. ``count_select`` writes each query's ``k`` best candidates in their final
   order straight into the output (only queries spanning several chunks are
   merged afterwards);
4. ``match`` scores the ``[Q, k]`` candidate grid into the same output buffer;
5. one copy brings candidates, counts and the ten statistics back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.config import SearchConfig
from rtsearch.errors import BackendError
from rtsearch.index.database import PeptideIndex
from rtsearch.scoring.candidates import Queries
from rtsearch.scoring.kernels import CHUNK, MAX_COUNT, MAX_LENGTH, MAX_WIDTH, source
from rtsearch.scoring.matching import STATS, MatchStats, fragment_charges
from rtsearch.spectrum import PeakBatch


@dataclass
class DevicePeaks:
    """A batch's preprocessed peaks on the device, plus the per-row sums the matcher reads."""

    mz: Any  # float64 [S, W], +inf padding
    intensity: Any  # float64 [S, W]
    cum: Any  # float64 [S, W + 1]: cumulative intensity along each row, from 0
    total: Any  # float64 [S]: summed intensity
    sq: Any  # float64 [S]: summed squared intensity
    n_peaks: Any  # int32 [S]

    @property
    def width(self) -> int:
        return int(self.mz.shape[1])


def row_sums(intensity: Any, xp: Any) -> tuple[Any, Any, Any, Any]:
    """``(intensity as float64, cumulative, total, squared total)`` of each row, on ``xp``."""
    inten = intensity.astype(xp.float64)
    cum = xp.zeros((inten.shape[0], inten.shape[1] + 1), dtype=xp.float64)
    cum[:, 1:] = xp.cumsum(inten, axis=1)
    return inten, cum, inten.sum(axis=1), (inten * inten).sum(axis=1)


class GpuIndex:
    """The index's arrays on the GPU and the two compiled kernels (see the module docstring)."""

    def __init__(self, index: PeptideIndex, cp: Any, to_device: Callable[[np.ndarray], Any] | None = None) -> None:
        if index.params.max_length > MAX_LENGTH:
            raise BackendError(f"the GPU backend scores peptides up to {MAX_LENGTH} residues (max_length is "
                               f"{index.params.max_length}); use --backend numpy")  # fmt: skip
        self.cp = cp
        self.to_device = to_device or cp.asarray
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
        module = cp.RawModule(code=source(), options=("--std=c++17",))
        self._count = module.get_function("count_select")
        self._match = module.get_function("match")
        self._iso: dict[tuple[int, ...], Any] = {}
        self.nbytes = int(
            sum(a.nbytes for a in (
                self.frag_mz, self.frag_pep, self.bucket_min, self.pep_mass, self.form_base, self.mod_pos,
                self.mod_id, self.residues, self.base_off,
            ))
        )  # fmt: skip

    # ---------------------------------------------------------------- peaks

    def upload(self, peaks: PeakBatch) -> DevicePeaks:
        """Host-preprocessed peaks to the device: sums on the host, one float64 block, one int32 array."""
        inten, cum, total, sq = row_sums(np.asarray(peaks.intensity), np)
        s, w = inten.shape
        parts = (np.asarray(peaks.mz, dtype=np.float64), inten, cum, total, sq)
        block = np.concatenate([p.ravel() for p in parts])
        d = self.to_device(block)
        a, b, c = s * w, 2 * s * w, 2 * s * w + s * (w + 1)
        return DevicePeaks(
            d[:a].reshape(s, w), d[a:b].reshape(s, w), d[b:c].reshape(s, w + 1), d[c : c + s], d[c + s :],
            self.cp.asarray(np.asarray(peaks.n_peaks, dtype=np.int32)),
        )  # fmt: skip

    def on_device(self, peaks: PeakBatch) -> DevicePeaks:
        """Device-preprocessed peaks, with the matcher's sums computed there."""
        inten, cum, total, sq = row_sums(peaks.intensity, self.cp)
        return DevicePeaks(peaks.mz, inten, cum, total, sq, peaks.n_peaks.astype(self.cp.int32, copy=False))

    # ---------------------------------------------------------------- scoring

    def score(
        self, peaks: DevicePeaks, queries: Queries, cfg: SearchConfig, lap: Callable[[str], None] | None = None
    ) -> tuple[np.ndarray, np.ndarray, MatchStats]:
        """``(candidates [Q, k], counts [Q, k], statistics)`` on the host, as the NumPy references give them."""
        if peaks.width > MAX_WIDTH:
            raise ValueError(f"at most {MAX_WIDTH} peaks per spectrum on the GPU")
        lap = lap or (lambda stage: None)
        cp = self.cp
        n_q, k = len(queries), cfg.candidates
        qk = n_q * k
        # one output buffer: candidates int64 [Q, k] | counts int32 [Q, k] (8-aligned) | stats float64 [10, Q, k]
        at_cnt = 8 * qk
        at_stats = at_cnt + 8 * ((4 * qk + 7) // 8)
        end = at_stats + 8 * len(STATS) * qk
        buf = cp.empty(max(end, 8), dtype=cp.uint8)
        if n_q:
            out_pep = buf[:at_cnt].view(cp.int64).reshape(n_q, k)
            out_cnt = buf[at_cnt : at_cnt + 4 * qk].view(cp.int32).reshape(n_q, k)
            stats = buf[at_stats:end].view(cp.float64).reshape(len(STATS), n_q, k)
            q_spec, zmax = self._candidates(peaks, queries, cfg, out_pep, out_cnt)
            lap("gpu candidates")
            self._match(
                ((qk + 127) // 128,), (128,),
                (np.int32(qk), np.int32(k), out_pep, q_spec, zmax, peaks.mz, peaks.intensity, peaks.cum,
                 np.int32(peaks.width), peaks.n_peaks, peaks.total, peaks.sq,
                 self.form_base, self.mod_pos, self.mod_id, np.int32(self.n_mods), self.mod_delta,
                 self.residues, self.base_off, self.residue_mass, np.float64(self.n_fixed), np.float64(self.c_fixed),
                 np.float64(cfg.fragment_tolerance.value), np.int32(cfg.fragment_tolerance.unit == "ppm"), stats),
            )  # fmt: skip
            lap("gpu match")
        host = buf.get()
        lap("device->host")
        cand = host[:at_cnt].view(np.int64).reshape(n_q, k)
        prelim = host[at_cnt : at_cnt + 4 * qk].view(np.int32).reshape(n_q, k)
        return cand, prelim, MatchStats(*host[at_stats:end].view(np.float64).reshape(len(STATS), n_q, k))

    def _candidates(self, peaks: DevicePeaks, queries: Queries, cfg: SearchConfig, out_pep: Any,
                    out_cnt: Any) -> tuple[Any, Any]:  # fmt: skip
        """Fill ``out_pep``/``out_cnt`` as `candidates_numpy` does; returns the queries' device rows and zmax."""
        cp = self.cp
        k = cfg.candidates
        n_q = len(queries)
        span = queries.hi - queries.lo
        n_chunks = np.maximum((span + CHUNK - 1) // CHUNK, 1)  # an empty window is one (empty) task
        single = bool((n_chunks == 1).all())
        if single:
            t_query, t_lo, t_hi = np.arange(n_q, dtype=np.int64), queries.lo, queries.hi
        else:
            t_query = np.repeat(np.arange(n_q, dtype=np.int64), n_chunks)
            first = np.repeat(np.cumsum(n_chunks) - n_chunks, n_chunks)
            t_lo = queries.lo[t_query] + (np.arange(t_query.shape[0]) - first) * CHUNK
            t_hi = np.minimum(t_lo + CHUNK, queries.hi[t_query])
        n_t = int(t_query.shape[0])
        zmax = fragment_charges(queries.charge, cfg.max_fragment_charge)
        ints = cp.asarray(np.concatenate([t_query, t_lo, t_hi, queries.spectrum, zmax]).astype(np.int64, copy=False))
        d_tq, d_lo, d_hi = ints[:n_t], ints[n_t : 2 * n_t], ints[2 * n_t : 3 * n_t]
        q_spec, d_zmax = ints[3 * n_t : 3 * n_t + n_q], ints[3 * n_t + n_q :]
        tp, tc = (out_pep, out_cnt) if single else (cp.empty((n_t, k), cp.int64), cp.empty((n_t, k), cp.int32))
        iso = self._isotopes(cfg.isotope_errors)
        pt, ft = cfg.precursor_tolerance, cfg.fragment_tolerance
        self._count(
            (n_t,), (256,),
            (self.frag_mz, self.frag_pep, self.bucket_min, np.int32(self.bucket_min.shape[0]),
             np.int64(self.frag_mz.shape[0]), np.int32(self.bucket_size),
             peaks.mz, np.int32(peaks.width), peaks.n_peaks, d_tq, d_lo, d_hi, q_spec, cp.asarray(queries.mass),
             self.pep_mass, np.float64(ft.value), np.int32(ft.unit == "ppm"), np.float64(pt.value),
             np.int32(pt.unit == "ppm"), iso, np.int32(iso.shape[0]), np.int32(k), np.int32(cfg.min_matched_peaks),
             tp, tc),
        )  # fmt: skip
        if not single:
            self._merge(d_tq, tp, tc, n_q, k, out_pep, out_cnt)
        return q_spec, d_zmax

    def _merge(self, d_tq: Any, tp: Any, tc: Any, n_q: int, k: int, out_pep: Any, out_cnt: Any) -> None:
        """The ``k`` best of each query over its chunks: sort by (query, count desc, peptide asc)."""
        cp = self.cp
        out_pep.fill(-1)
        out_cnt.fill(0)
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

    def _isotopes(self, errors: tuple[int, ...]) -> Any:
        iso = self._iso.get(errors)
        if iso is None:
            iso = self._iso[errors] = self.cp.asarray(np.array(errors, dtype=np.int32))
        return iso
