"""Library scoring of a batch: each spectrum's best library entry and its features, on one backend.

`LibraryEngine` is to a `SpectralLibrary` what `rtsearch.scoring.database.engine.Engine`
is to a peptide index: `score` returns a `ScoredBatch` whose match ids are library
entries and whose features are `LIBRARY_FEATURES` (SpectraST's scores, the precursor
error, the number of candidates). Scoring runs on the GPU (`GpuLibrary`) or in NumPy
(`score_library`); both give the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.config import LibraryMode
from rtsearch.library.store import SpectralLibrary
from rtsearch.matches import BestMatches, ScoredBatch
from rtsearch.scoring.backend import Backend, get_backend
from rtsearch.scoring.library.scores import LibraryMatches, score_library
from rtsearch.types import Spectrum, Tolerance

LIBRARY_FEATURES = ("f_value", "dot", "delta_dot", "dot_bias", "abs_ppm_error", "log_candidates", "matched_peaks")
NO_ENTRY = "no library entry within the precursor tolerance"
_F = {name: k for k, name in enumerate(LIBRARY_FEATURES)}


class LibraryEngine:
    """Scores spectra against a loaded `SpectralLibrary` on one backend."""

    def __init__(
        self, lib: SpectralLibrary, tolerance: Tolerance, backend: Backend | None = None, *,
        isotope_errors: Sequence[int] = (0,), mode: LibraryMode = "auto",
    ) -> None:  # fmt: skip
        self.lib = lib
        self.tolerance = tolerance
        self.isotope_errors = tuple(isotope_errors)
        self.mode: LibraryMode = mode
        self.backend = backend or get_backend("auto")
        self._gpu: Any = None
        if self.backend.is_gpu:
            from rtsearch.scoring.library.gpu import GpuLibrary

            self._gpu = GpuLibrary(lib, self.backend.xp)

    def device_bytes(self) -> int:
        """Bytes of library data on the device (0 on NumPy)."""
        return sum(self._gpu.device_bytes().values()) if self._gpu is not None else 0

    def matches(self, spectra: Sequence[Spectrum]) -> LibraryMatches:
        """Best entry and SpectraST scores of each spectrum (GPU or NumPy; the same numbers)."""
        if self._gpu is not None:
            out: LibraryMatches = self._gpu.score(spectra, self.tolerance, isotope_errors=self.isotope_errors,
                                                  mode=self.mode)  # fmt: skip
            return out
        return score_library(self.lib, spectra, self.tolerance, isotope_errors=self.isotope_errors)

    def score(self, batch: SpectraBatch) -> ScoredBatch:
        """Best entry and `LIBRARY_FEATURES` of every spectrum; spectra with a problem are not scored."""
        n = len(batch)
        problem = batch.problem
        m = self.matches(batch.spectra())  # library scoring works spectrum by spectrum
        hit = (m.entry >= 0) & np.fromiter((not p for p in problem), dtype=bool, count=n)
        e = np.where(hit, m.entry, 0)
        prec = batch.precursor_mz
        calc = np.where(hit, self.lib.precursor_mz[e] if n else np.zeros(0), np.nan)
        ppm = (prec - calc) / calc * 1e6
        feats = np.full((n, len(LIBRARY_FEATURES)), np.nan)
        cols = {"f_value": m.f_value, "dot": m.dot, "delta_dot": m.delta_dot, "dot_bias": m.dot_bias,
                "abs_ppm_error": np.abs(ppm), "log_candidates": np.log1p(m.candidates),
                "matched_peaks": m.matched_peaks}  # fmt: skip
        for name, values in cols.items():
            feats[hit, _F[name]] = values[hit]
        as_int = lambda a: np.where(hit, a, 0).astype(np.int64)  # noqa: E731
        best = BestMatches(
            match=np.where(hit, m.entry, -1).astype(np.int64), charge=as_int(self.lib.charge[e]), calc_mz=calc,
            ppm_error=ppm, matched_peaks=as_int(m.matched_peaks), features=feats,
        )  # fmt: skip
        return ScoredBatch(
            run=list(batch.run), scan=batch.scan, precursor_mz=prec, rt=batch.rt, best=best,
            reason=[p or ("" if h else NO_ENTRY) for p, h in zip(problem, hit.tolist(), strict=True)],
            native_id=batch.native_id,
        )  # fmt: skip
