"""The engine's GPU side: the index on the device, a batch's peaks uploaded, the kernels launched.

A batch costs a fixed handful of device calls, whatever its size, because small
batches (the daemon at low rates scores spectra one by one) are dominated by
per-call overhead, not by arithmetic:

1. one copy to the device (`Upload`): the queries (tasks, windows, spectrum
   rows, fragment charges, masses) and, for small batches preprocessed on the
   host, the peaks with the matcher's row sums; larger batches are preprocessed
   on the device by one kernel, row sums included (`GpuIndex.preprocess`,
   `rtsearch.scoring.database.preprocess_kernel`);
2. ``count_select`` writes each query's ``k`` best candidates in their final
   order straight into the output (only queries spanning several chunks are
   merged afterwards);
3. ``match`` scores the ``[Q, k]`` candidate grid into the same output buffer;
4. one copy brings candidates, counts and the ten statistics back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.config import SearchConfig
from rtsearch.database.index import PeptideIndex
from rtsearch.errors import BackendError
from rtsearch.scoring.database.candidates import Queries
from rtsearch.scoring.database.kernels import CHUNK, MAX_LENGTH, MAX_WIDTH, source
from rtsearch.scoring.database.matching import STATS, MatchStats, fragment_charges
from rtsearch.scoring.database.merge_kernel import merge_chunks, merge_on_device
from rtsearch.scoring.database.preprocess_kernel import MAX_PEAKS, THREADS
from rtsearch.scoring.database.preprocess_kernel import source as preprocess_source
from rtsearch.scoring.upload import upload_all
from rtsearch.spectrum import FlatPeaks, PeakBatch

SMALL_BLOCK = 1024  # threads per count block while the tasks fill at most two blocks per SM
LARGE_BLOCK = 256

log = logging.getLogger(__name__)


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


class Upload:
    """Host arrays packed into one float64 block, so a batch costs one host-to-device copy.

    Each part is stored at an 8-byte boundary in its own dtype (int32 parts padded to an
    even count). `Upload.send` copies the block; the kernels then take each part as a raw
    device pointer (`Uploaded.ptr`): a CuPy view per part costs more host time (several
    microseconds each) than the copy itself for a small batch.
    """

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self._where: dict[str, tuple[int, np.dtype[Any], tuple[int, ...]]] = {}
        self._at = 0  # in 8-byte words

    def add(self, name: str, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a)
        raw = a.reshape(-1).view(np.uint8)
        words = -(-raw.shape[0] // 8)
        if words * 8 != raw.shape[0]:
            raw = np.concatenate([raw, np.zeros(words * 8 - raw.shape[0], np.uint8)])
        self._parts.append(raw.view(np.float64))
        self._where[name] = (self._at, a.dtype, a.shape)
        self._at += words

    def send(self, to_device: Callable[[np.ndarray], Any]) -> Uploaded:
        block = to_device(np.concatenate(self._parts) if self._parts else np.zeros(1))
        return Uploaded(block, self._where)


@dataclass
class Uploaded:
    """The block on the device and where each part lies in it."""

    block: Any  # float64 [words] on the device (a NumPy array in tests)
    where: dict[str, tuple[int, np.dtype[Any], tuple[int, ...]]]

    def ptr(self, name: str) -> Any:
        """Device pointer to part ``name`` (a kernel argument)."""
        return self.block.data + 8 * self.where[name][0]

    def array(self, name: str) -> Any:
        """Part ``name`` as an array view of the block."""
        at, dtype, shape = self.where[name]
        n = int(np.prod(shape))
        words = -(-n * dtype.itemsize // 8)
        return self.block[at : at + words].view(dtype)[:n].reshape(shape)


def _functions(cp: Any, device: int, code: str, options: tuple[str, ...], names: tuple[str, ...]) -> list[Any]:
    """The kernels ``names`` of ``code``, compiled (or loaded from CuPy's cache) for ``device``."""
    with cp.cuda.Device(device):
        module = cp.RawModule(code=code, options=options)
        return [module.get_function(n) for n in names]


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

        # NVRTC (cold: ~0.8 s) in threads while the CUDA context starts and the index is copied
        compiling = ThreadPoolExecutor(2, thread_name_prefix="nvrtc")
        device = cp.cuda.runtime.getDevice()
        kernels = compiling.submit(_functions, cp, device, source(), ("--std=c++17",), ("count_select", "match"))
        rows = compiling.submit(_functions, cp, device, preprocess_source(), ("--std=c++17", "--fmad=false"),
                                ("preprocess_rows",))  # fmt: skip
        compiling.shutdown(wait=False)
        # the index's arrays (memory-mapped) in one pass, through pinned chunks over threads
        (self.frag_mz, self.frag_pep, self.bucket_min, self.pep_mass, self.form_base, self.mod_pos, self.mod_id,
         self.mod_delta, self.residues, self.base_off, self.residue_mass) = upload_all(cp, [
            f.mz, f.peptide, f.bucket_min_mz, index.mass, index.forms.base,
            np.ascontiguousarray(index.forms.mod_pos, dtype=np.int16),
            np.ascontiguousarray(index.forms.mod_id, dtype=np.uint8),
            np.array([m.delta for m in index.mods.variable] or [0.0], dtype=np.float64),
            index.bases.residues, np.ascontiguousarray(index.bases.offsets, dtype=np.int64), index.residue_mass,
        ])  # fmt: skip
        self.bucket_size = f.bucket_size
        self.n_mods = int(index.forms.mod_pos.shape[1])
        self.n_fixed, self.c_fixed = index.mods.terminal_fixed()
        log.debug("index copied to the device")
        self._count, self._match = kernels.result()
        (self._preprocess_rows,) = rows.result()
        log.debug("scoring kernels loaded")
        self._iso: dict[tuple[int, ...], Any] = {}
        # count_select block size by number of tasks (see `count_threads`; measured in the since-deleted probe
        # engine_probe.py)
        self.small_block, self.large_block = SMALL_BLOCK, LARGE_BLOCK
        self.small_tasks = 2 * int(cp.cuda.Device().attributes["MultiProcessorCount"])
        self.merge_kernel = True  # windows wider than a chunk merged by `merge_kernel` (False: its reference)
        self.nbytes = int(
            sum(a.nbytes for a in (
                self.frag_mz, self.frag_pep, self.bucket_min, self.pep_mass, self.form_base, self.mod_pos,
                self.mod_id, self.residues, self.base_off,
            ))
        )  # fmt: skip

    # ---------------------------------------------------------------- peaks

    def on_device(self, peaks: PeakBatch) -> DevicePeaks:
        """Device-preprocessed peaks, with the matcher's sums computed there."""
        inten, cum, total, sq = row_sums(peaks.intensity, self.cp)
        return DevicePeaks(peaks.mz, inten, cum, total, sq, peaks.n_peaks.astype(self.cp.int32, copy=False))

    def preprocess(
        self, flat: FlatPeaks, *, top_peaks: int, min_mz: float, precursor_removal_da: float, deisotope_da: float
    ) -> DevicePeaks:
        """`rtsearch.spectrum.preprocess` and the row sums of packed peaks, in one kernel (one upload)."""
        cp = self.cp
        s = int(flat.lengths.shape[0])
        if s and int(flat.lengths.max()) > MAX_PEAKS:
            raise ValueError(f"at most {MAX_PEAKS} peaks per packed spectrum")
        width = min(top_peaks, max(int(flat.lengths.max()) if s else 0, 1))
        start = np.zeros(s + 1, dtype=np.int64)
        np.cumsum(flat.lengths, out=start[1:])
        up = Upload()
        up.add("mz", flat.mz.astype(np.float64, copy=False))
        up.add("intensity", flat.intensity.astype(np.float32, copy=False))
        up.add("start", start)
        up.add("precursor", flat.precursor_mz.astype(np.float64, copy=False))
        d = up.send(self.to_device)
        # one output block: mz | intensity | cum | total | sq (float64), then n_peaks (int32)
        out = cp.empty(s * (3 * width + 3) + (s + 1) // 2 + 1, dtype=cp.float64)
        at = np.cumsum([0, s * width, s * width, s * (width + 1), s, s])
        mz, inten, cum, total, sq = (out[at[k] : at[k + 1]] for k in range(5))
        n_peaks = out[at[5] :].view(cp.int32)[:s]
        if s:
            self._preprocess_rows(
                (s,), (THREADS,),
                (d.ptr("mz"), d.ptr("intensity"), d.ptr("start"), d.ptr("precursor"), np.float64(min_mz),
                 np.float64(precursor_removal_da), np.float64(deisotope_da), np.int32(width),
                 mz, inten, cum, total, sq, n_peaks),
            )  # fmt: skip
        return DevicePeaks(mz.reshape(s, width), inten.reshape(s, width), cum.reshape(s, width + 1), total, sq,
                           n_peaks)  # fmt: skip

    @staticmethod
    def _add_host_peaks(up: Upload, peaks: PeakBatch) -> None:
        inten, cum, total, sq = row_sums(np.asarray(peaks.intensity), np)
        up.add("mz", np.asarray(peaks.mz, dtype=np.float64))
        up.add("intensity", inten)
        up.add("cum", cum)
        up.add("total", total)
        up.add("sq", sq)
        up.add("n_peaks", np.asarray(peaks.n_peaks, dtype=np.int32))

    # ---------------------------------------------------------------- scoring

    def score(
        self, peaks: PeakBatch | DevicePeaks, queries: Queries, cfg: SearchConfig,
        lap: Callable[[str], None] | None = None, *, keep: bool = False,
    ) -> tuple[Any, Any, MatchStats]:  # fmt: skip
        """``(candidates [Q, k], counts [Q, k], statistics)`` on the host, as the NumPy references give them (with
        ``keep``, left on the device: CuPy views of one buffer, for `best_matches` to choose from there).

        ``peaks`` is a host `PeakBatch` (uploaded here, in the batch's one copy) or `DevicePeaks`.
        """
        lap = lap or (lambda stage: None)
        cp = self.cp
        n_q, k = len(queries), cfg.candidates
        qk = n_q * k
        up = Upload()
        tasks = self._tasks(queries)
        for name, a in tasks.items():
            up.add(name, a)
        up.add("zmax", fragment_charges(queries.charge, cfg.max_fragment_charge).astype(np.int64))
        up.add("mass", queries.mass.astype(np.float64, copy=False))
        if isinstance(peaks, PeakBatch):
            width = int(peaks.mz.shape[1])
            self._add_host_peaks(up, peaks)
        else:
            width = peaks.width
        if width > MAX_WIDTH:
            raise ValueError(f"at most {MAX_WIDTH} peaks per spectrum on the GPU")
        d = up.send(self.to_device)
        if isinstance(peaks, PeakBatch):
            names = ("mz", "intensity", "cum", "n_peaks", "total", "sq")
            mz, inten, cum, n_peaks, total, sq = (d.ptr(n) for n in names)
        else:
            p = peaks
            mz, inten, cum, n_peaks, total, sq = p.mz, p.intensity, p.cum, p.n_peaks, p.total, p.sq
        lap("upload")
        # one output buffer: candidates int64 [Q, k] | counts int32 [Q, k] (8-aligned) | stats float64 [10, Q, k]
        at_cnt = 8 * qk
        at_stats = at_cnt + 8 * ((4 * qk + 7) // 8)
        end = at_stats + 8 * len(STATS) * qk
        buf = cp.empty(max(end, 8), dtype=cp.uint8)
        if n_q:
            out_pep, stats = buf.data, buf.data + at_stats
            self._candidates(mz, width, n_peaks, d, n_q, cfg, buf, at_cnt)
            lap("gpu candidates")
            self._match(
                ((qk + 127) // 128,), (128,),
                (np.int32(qk), np.int32(k), out_pep, d.ptr("spectrum"), d.ptr("zmax"), mz, inten, cum,
                 np.int32(width), n_peaks, total, sq,
                 self.form_base, self.mod_pos, self.mod_id, np.int32(self.n_mods), self.mod_delta,
                 self.residues, self.base_off, self.residue_mass, np.float64(self.n_fixed), np.float64(self.c_fixed),
                 np.float64(cfg.fragment_tolerance.value), np.int32(cfg.fragment_tolerance.unit == "ppm"), stats),
            )  # fmt: skip
            lap("gpu match")
        out = buf if keep else buf.get()
        if not keep:
            lap("device->host")
        cand = out[:at_cnt].view(np.int64).reshape(n_q, k)
        prelim = out[at_cnt : at_cnt + 4 * qk].view(np.int32).reshape(n_q, k)
        return cand, prelim, MatchStats(*out[at_stats:end].view(np.float64).reshape(len(STATS), n_q, k))

    @staticmethod
    def _tasks(queries: Queries) -> dict[str, np.ndarray]:
        """The count kernel's tasks: one per (query, chunk of ``CHUNK`` peptides of its window)."""
        n_q = len(queries)
        span = queries.hi - queries.lo
        n_chunks = np.maximum((span + CHUNK - 1) // CHUNK, 1)  # an empty window is one (empty) task
        if (n_chunks == 1).all():
            t_query, t_lo, t_hi = np.arange(n_q, dtype=np.int64), queries.lo, queries.hi
        else:
            t_query = np.repeat(np.arange(n_q, dtype=np.int64), n_chunks)
            first = np.repeat(np.cumsum(n_chunks) - n_chunks, n_chunks)
            t_lo = queries.lo[t_query] + (np.arange(t_query.shape[0]) - first) * CHUNK
            t_hi = np.minimum(t_lo + CHUNK, queries.hi[t_query])
        first = np.concatenate([[0], np.cumsum(n_chunks)])  # each query's first task (`merge_kernel`)
        as64 = {"t_query": t_query, "t_lo": t_lo, "t_hi": t_hi, "spectrum": queries.spectrum, "first": first}
        return {name: a.astype(np.int64, copy=False) for name, a in as64.items()}

    def _candidates(
        self, mz: Any, width: int, n_peaks: Any, d: Uploaded, n_q: int, cfg: SearchConfig, buf: Any, at_cnt: int
    ) -> None:
        """Candidates and counts into ``buf`` (int64 [Q, k] at 0, int32 [Q, k] at ``at_cnt``), as
        `candidates_numpy` computes them."""
        cp = self.cp
        k = cfg.candidates
        n_t = int(d.where["t_query"][2][0])
        single = n_t == n_q  # every query's window fits one chunk: the kernel's output is final
        if single:
            tp, tc = buf.data, buf.data + at_cnt
        else:
            tp, tc = cp.empty((n_t, k), cp.int64), cp.empty((n_t, k), cp.int32)
        iso = self._isotopes(cfg.isotope_errors)
        pt, ft = cfg.precursor_tolerance, cfg.fragment_tolerance
        self._count(
            (n_t,), (self.count_threads(n_t),),
            (self.frag_mz, self.frag_pep, self.bucket_min, np.int32(self.bucket_min.shape[0]),
             np.int64(self.frag_mz.shape[0]), np.int32(self.bucket_size),
             mz, np.int32(width), n_peaks, d.ptr("t_query"), d.ptr("t_lo"), d.ptr("t_hi"), d.ptr("spectrum"),
             d.ptr("mass"), self.pep_mass, np.float64(ft.value), np.int32(ft.unit == "ppm"), np.float64(pt.value),
             np.int32(pt.unit == "ppm"), iso, np.int32(iso.shape[0]), np.int32(k), np.int32(cfg.min_matched_peaks),
             tp, tc),
        )  # fmt: skip
        if not single:
            qk = n_q * k
            out_pep = buf[: 8 * qk].view(cp.int64).reshape(n_q, k)
            out_cnt = buf[at_cnt : at_cnt + 4 * qk].view(cp.int32).reshape(n_q, k)
            if self.merge_kernel:  # one launch (`merge_kernel`); else the reference's ~20 CuPy calls and a sort
                merge_on_device(cp, d.array("first"), tp, tc, out_pep, out_cnt)
            else:
                merge_chunks(cp, d.array("t_query"), tp, tc, out_pep, out_cnt)

    def count_threads(self, n_tasks: int) -> int:
        """Threads per count block: many when few blocks run (latency), fewer when the GPU is full."""
        return self.small_block if n_tasks <= self.small_tasks else self.large_block

    def _isotopes(self, errors: tuple[int, ...]) -> Any:
        iso = self._iso.get(errors)
        if iso is None:
            iso = self._iso[errors] = self.cp.asarray(np.array(errors, dtype=np.int32))
        return iso
