"""The database search engine: a batch of spectra in, the best peptide of each out.

`Engine.score` is synchronous and does no I/O: pack and preprocess peaks,
expand spectra into (spectrum, charge) queries, take candidates from the
fragment index, score them fully, pick each spectrum's best match and its
features. The offline search and the daemon both call it, so a result
offline is the result online. The backend (NumPy or CuPy) only changes where
the arrays live and which implementation of each step runs.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.config import SearchConfig
from rtsearch.database.index import PeptideIndex
from rtsearch.matches import ScoredBatch
from rtsearch.scoring.backend import Backend, array_module, get_backend
from rtsearch.scoring.database.candidates import Queries, candidates_numpy, make_queries
from rtsearch.scoring.database.features import best_matches
from rtsearch.scoring.database.lone import best_one
from rtsearch.scoring.database.matching import MatchStats, match_numpy
from rtsearch.scoring.database.partial import QueryScores
from rtsearch.spectrum import PeakBatch, pack, pad, preprocess
from rtsearch.stopwatch import Stopwatch

if TYPE_CHECKING:
    from rtsearch.scoring.database.gpu import DevicePeaks

# Queries per NumPy step: bounds the size of the intermediate arrays.
NUMPY_CHUNK = 128
# On the GPU, batches up to this size are preprocessed on the host (`rtsearch.spectrum.preprocess`
# in NumPy), larger ones on the device by one kernel (`GpuIndex.preprocess`, the same rows). Whole
# engine batch on an H100 (the since-deleted probe `engine_probe.py --preprocess`): 16 spectra host 1.65 ms, kernel
# 1.99 ms; 64: 3.26 and 2.66 ms; 128: 4.86 and 2.54 ms.
HOST_PREPROCESS_MAX = 32
# On the GPU, batches of at least this many queries have their best matches chosen on the device by one kernel
# (`choice_kernel`; only the chosen rows are copied back), smaller ones on the host: the device's way costs a
# dozen CuPy calls of ~30–50 µs host time each on the H100 machine. Engine alone, H100, every batch on the device
# against the host's choice (the since-deleted probe `engine_probe.py --device-choice-min 0`,
# docs/history/RESULTS.md, 12:37): 1 spectrum
# 1.55–2.03 against 1.02–1.49 ms, 256 even, 1,024 7.8–8.6 against 8.1–11.8 ms; 4,096 19–27 ms (3379dbc, whose
# choice was on the host: 33–34 ms).
DEVICE_CHOICE_MIN = 512


class Engine:
    """Scores spectra against a loaded `PeptideIndex` on one backend."""

    def __init__(
        self,
        index: PeptideIndex,
        cfg: SearchConfig,
        backend: Backend | None = None,
        *,
        profile: bool = False,
        host_preprocess_max: int = HOST_PREPROCESS_MAX,
        fused_preprocess: bool = True,
        first: int = 0,
        device_choice_min: int = DEVICE_CHOICE_MIN,
    ) -> None:
        """``first``: the number, in the whole target, of ``index``'s first peptide (a slice: `PeptideIndex.slice`)."""
        self.index = index
        self.first = first
        self.device_choice_min = device_choice_min
        self.host_preprocess_max = host_preprocess_max
        # device batches: one kernel (`GpuIndex.preprocess`) rather than `rtsearch.spectrum.preprocess`'s CuPy calls
        self.fused_preprocess = fused_preprocess
        # with profile=True each step synchronizes the device and adds its seconds here
        self.profile = profile
        self.stage_seconds: dict[str, float] = defaultdict(float)
        self.cfg = cfg
        self.backend = backend or get_backend("auto")
        self.peptide_mass = np.ascontiguousarray(index.mass)
        self._gpu: Any = None
        if self.backend.is_gpu:
            from rtsearch.scoring.database.gpu import GpuIndex

            self._gpu = GpuIndex(index, self.backend.xp, self.backend.to_device)
            # worker threads score on non-blocking streams, which do not wait for this upload
            self.backend.synchronize()

    def device_bytes(self) -> int:
        """Bytes of index data held on the device (0 on NumPy)."""
        return self._gpu.nbytes if self._gpu is not None else 0

    @property
    def entries(self) -> int:
        """Peptides (targets and decoys) searched."""
        return len(self.peptide_mass)

    def queries(self, batch: SpectraBatch, ok: np.ndarray) -> Queries:
        """One query per (spectrum, charge); the spectrum's charges or the configured ones."""
        default = self.cfg.charges
        zs = [z or default for z in batch.charges]
        counts = np.fromiter((len(z) for z in zs), dtype=np.int64, count=len(zs)) * ok
        charges = np.fromiter(
            itertools.chain.from_iterable(z for z, o in zip(zs, ok, strict=True) if o), dtype=np.int64,
            count=int(counts.sum()),
        )  # fmt: skip
        spec_idx = np.repeat(np.arange(len(batch), dtype=np.int64), counts)
        return make_queries(
            spec_idx, charges, batch.precursor_mz, self.peptide_mass, self.cfg.precursor_tolerance,
            self.cfg.isotope_errors,
        )  # fmt: skip

    def preprocess(self, spectra: SpectraBatch, *, on_host: bool = False) -> PeakBatch | DevicePeaks:
        """Pack, pad and preprocess on the backend's device (on the host with ``on_host``)."""
        c = self.cfg
        # deisotope only where isotope peaks are resolved (high-resolution fragments)
        tol = float(c.fragment_tolerance.width(1000.0))
        deiso = tol if (c.deisotope and tol <= 0.05) else 0.0
        if self._gpu is not None and not on_host and self.fused_preprocess:
            return self._gpu.preprocess(
                pack(spectra), top_peaks=c.top_peaks, min_mz=c.min_mz, precursor_removal_da=c.precursor_removal_da,
                deisotope_da=deiso,
            )  # fmt: skip
        xp = np if on_host else self.backend.xp
        batch = pad(pack(spectra), xp, None if on_host else self.backend.to_device)
        return preprocess(
            batch, top_peaks=c.top_peaks, min_mz=c.min_mz, precursor_removal_da=c.precursor_removal_da, xp=xp,
            deisotope_da=deiso,
        )

    def match_probability(self, peaks: PeakBatch | DevicePeaks) -> np.ndarray:
        """Chance that a random fragment m/z falls within tolerance of some peak, per spectrum."""
        xp = array_module(peaks.mz)
        n = peaks.n_peaks.astype(xp.int64)
        rows = xp.arange(peaks.mz.shape[0])
        lo = peaks.mz[:, 0]
        hi = peaks.mz[rows, xp.maximum(n - 1, 0)]
        with np.errstate(invalid="ignore"):  # empty rows: inf - inf, replaced just below
            span = xp.where(n > 1, hi - lo, 1.0)
        span = xp.where(xp.isfinite(span) & (span > 0), span, 1.0)
        mid = xp.where(n > 0, (lo + hi) / 2, 1000.0)
        mid = xp.where(xp.isfinite(mid), mid, 1000.0)
        width = 2 * self.cfg.fragment_tolerance.width(mid)
        return self.backend.to_host(xp.clip(n * width / span, 1e-6, 1.0))

    def score(self, spectra: SpectraBatch) -> ScoredBatch:
        """Best match and features of every spectrum (see the module docstring). An engine of a slice (``first``
        > 0: a partition worker's) numbers its matches as the slice does (its peptide 0 is the target's ``first``)
        and answers spectra whose every query's window lies in its slice (`rtsearch.cluster.pieces`)."""
        return self.best_of(spectra, self.score_queries(spectra, on_device=True, local=True), local=True)

    def score_queries(
        self, spectra: SpectraBatch, *, own: tuple[float, float] | None = None, on_device: bool = False,
        local: bool = False,
    ) -> QueryScores:  # fmt: skip
        """Every query of ``spectra`` scored (candidates and their statistics), before the best is chosen;
        with ``own``, only the queries of neutral mass in [own[0], own[1]) (a cluster's partition worker:
        `rtsearch.scoring.database.partial`). Peptide numbers are the whole target's (``first`` added), or with
        ``local`` this engine's own.
        ``on_device``: on a GPU, candidates and statistics of a batch of ``device_choice_min`` queries or more stay
        there (CuPy), for `best_of` alone; else on the host."""
        lap = Stopwatch(self.backend.synchronize if self.profile else None)
        self.backend.begin_batch()
        n = len(spectra)
        reason = list(spectra.problem)
        on_host = self._gpu is not None and n <= self.host_preprocess_max
        peaks = self.preprocess(spectra, on_host=on_host)
        n_peaks = np.asarray(peaks.n_peaks) if on_host else self.backend.to_host(peaks.n_peaks)
        lap("pack+preprocess")
        ok = np.fromiter((not r for r in reason), dtype=bool, count=n)
        for i in np.flatnonzero(ok & (n_peaks < self.cfg.min_peaks)).tolist():
            reason[i] = f"too few peaks after preprocessing ({n_peaks[i]} < {self.cfg.min_peaks})"
            ok[i] = False
        queries = self.queries(spectra, ok)
        starts = np.searchsorted(queries.spectrum, queries.spectrum, side="left")
        order = np.arange(len(queries), dtype=np.int64) - starts
        if own is not None:
            mine = np.flatnonzero((queries.mass >= own[0]) & (queries.mass < own[1]))
            queries, order = queries.take(mine), order[mine]
        lap("queries")
        if self._gpu is not None:
            # host peaks travel with the queries; fused ones are ready
            dev = peaks if on_host or not isinstance(peaks, PeakBatch) else self._gpu.on_device(peaks)
            keep = on_device and len(queries) >= self.device_choice_min
            cand, prelim, stats = self._gpu.score(dev, queries, self.cfg, lap=lap, keep=keep)
        else:
            assert isinstance(peaks, PeakBatch)
            cand, prelim, stats = self._score_numpy(peaks, queries)
            lap("candidates+match")
        if self.first and not local:
            xp = array_module(cand)
            cand = xp.where(cand >= 0, cand + self.first, cand)
        return QueryScores(queries if local else queries.shifted(self.first), order, cand, prelim, stats,
                           self.match_probability(peaks), reason, lap.stages)  # fmt: skip

    def best_of(self, spectra: SpectraBatch, scored: QueryScores, *, local: bool = False) -> ScoredBatch:
        """Each spectrum's best match over its scored queries, and its features: an engine of the whole target,
        or (``local``) of a slice over queries it scored and numbered itself."""
        if self.first and not local:
            raise ValueError("the best of a spectrum's queries is chosen by an engine of the whole target")
        lap = Stopwatch(self.backend.synchronize if self.profile else None)
        lap.stages.update(scored.stages)
        n = len(spectra)
        c = self.cfg
        if n == 1 and c.ranks == 1 and isinstance(scored.cand, np.ndarray):  # a lone spectrum (`lone`: its cost)
            best, lower = best_one(
                self.index, scored.queries, scored.cand, scored.prelim, scored.stats, primary=c.score,
                precursor_tolerance=c.precursor_tolerance, isotope_errors=c.isotope_errors,
                match_probability=scored.match_probability, max_fragment_charge=c.max_fragment_charge,
            ), []  # fmt: skip
        else:
            best, *lower = best_matches(
                self.index, scored.queries, scored.cand, scored.prelim, scored.stats, n, primary=c.score,
                precursor_tolerance=c.precursor_tolerance, isotope_errors=c.isotope_errors,
                match_probability=scored.match_probability, max_fragment_charge=c.max_fragment_charge,
                ranks=c.ranks,
            )  # fmt: skip
        reason = list(scored.reason)
        for i in np.flatnonzero(best.match < 0).tolist():
            if not reason[i]:
                reason[i] = "no candidate peptide matched"
        lap("features")
        if self.profile:
            for stage, seconds in lap.stages.items():
                self.stage_seconds[stage] += seconds
        return ScoredBatch(run=list(spectra.run), scan=spectra.scan, precursor_mz=spectra.precursor_mz, rt=spectra.rt,
                           best=best, reason=reason, stages=lap.stages, native_id=spectra.native_id,
                           lower=lower)  # fmt: skip

    def _score_numpy(self, peaks: PeakBatch, queries: Queries) -> tuple[np.ndarray, np.ndarray, MatchStats]:
        c = self.cfg
        k = c.candidates
        cands, prelims, parts = [], [], []
        for s in range(0, len(queries), NUMPY_CHUNK):
            sub = queries.take(slice(s, s + NUMPY_CHUNK))
            cand, prelim = candidates_numpy(
                self.index.fragments, self.peptide_mass, peaks.mz, peaks.n_peaks, sub,
                precursor_tolerance=c.precursor_tolerance, fragment_tolerance=c.fragment_tolerance,
                isotope_errors=c.isotope_errors, k=k, min_count=c.min_matched_peaks,
            )  # fmt: skip
            stats = match_numpy(
                self.index, peaks.mz, peaks.intensity, peaks.n_peaks, sub.spectrum, sub.charge, cand,
                c.fragment_tolerance, c.max_fragment_charge,
            )  # fmt: skip
            cands.append(cand)
            prelims.append(prelim)
            parts.append(stats)
        if not cands:
            empty = np.zeros((0, k))
            n_fields = len(MatchStats.__dataclass_fields__)
            return np.zeros((0, k), np.int64), np.zeros((0, k), np.int32), MatchStats(*([empty] * n_fields))
        merged = MatchStats(*(np.concatenate([getattr(p, f) for p in parts]) for f in MatchStats.__dataclass_fields__))
        return np.concatenate(cands), np.concatenate(prelims), merged
