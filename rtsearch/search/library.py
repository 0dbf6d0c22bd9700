"""The spectral library search engine: a batch of spectra in, each one's best library entry out.

`LibraryEngine` is to a `SpectralLibrary` what `rtsearch.scoring.database.engine.Engine` is to a
peptide index, with the same surface (`rtsearch.scoring.database.engine.SearchEngine`), so the
daemon and the offline search drive either: `score` returns a `ScoredBatch`
whose match ids are library entries and whose features are `LIBRARY_FEATURES`;
`new_run` gives a `LiveRun` over a `LibraryTable`, whose results also carry
``library_id``, ``dot``, ``dot_bias``, ``delta_dot`` and ``f_value``.
Scoring runs on the GPU (`GpuLibrary`) or in NumPy (`score_library`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from rtsearch.library.store import SpectralLibrary
from rtsearch.scoring.backend import Backend, get_backend
from rtsearch.scoring.database.engine import Reload, ScoredBatch, Searching
from rtsearch.scoring.database.features import BestMatches
from rtsearch.scoring.library.scores import LibraryMatches, LibraryMode, score_library
from rtsearch.search.libtable import LIBRARY_FEATURES, LibraryTable
from rtsearch.search.live import LiveRun
from rtsearch.types import Spectrum, Tolerance

NO_ENTRY = "no library entry within the precursor tolerance"
_F = {name: k for k, name in enumerate(LIBRARY_FEATURES)}


class LibraryEngine:
    """Scores spectra against a loaded `SpectralLibrary` on one backend."""

    searching: Searching = "library"

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

    @property
    def entries(self) -> int:
        """Library entries (targets and decoys) searched."""
        return len(self.lib)

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

    def score(self, spectra: Sequence[Spectrum]) -> ScoredBatch:
        """Best entry and `LIBRARY_FEATURES` of every spectrum; spectra with a problem are not scored."""
        n = len(spectra)
        problem = [sp.problem for sp in spectra]
        m = self.matches(spectra)
        hit = (m.entry >= 0) & np.array([not p for p in problem], dtype=bool)
        e = np.where(hit, m.entry, 0)
        prec = np.fromiter((sp.precursor_mz for sp in spectra), dtype=np.float64, count=n)
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
            peptide=np.where(hit, m.entry, -1).astype(np.int64), charge=as_int(self.lib.charge[e]), calc_mz=calc,
            ppm_error=ppm, matched_peaks=as_int(m.matched_peaks), features=feats,
        )  # fmt: skip
        return ScoredBatch(
            run=[sp.run for sp in spectra], scan=np.fromiter((sp.scan for sp in spectra), np.int64, count=n),
            precursor_mz=prec, rt=np.fromiter((sp.rt for sp in spectra), np.float64, count=n), best=best,
            reason=[p or ("" if h else NO_ENTRY) for p, h in zip(problem, hit.tolist(), strict=True)],
        )  # fmt: skip

    def new_run(
        self, name: str, *, refits: Literal["inline", "deferred"] = "inline", q_refresh: float = 0.0
    ) -> LiveRun:
        """A run's live results over a `LibraryTable`, ranked by the F-value until its discriminant."""
        return LibraryRun(name, self.lib, primary="f_value", refits=refits, q_refresh=q_refresh,
                          table=LibraryTable(self.lib), features=LIBRARY_FEATURES)  # fmt: skip

    def warm_up_spectra(self, n: int) -> list[Spectrum]:
        """``n`` spectra made of library entries' own peaks, charges varied, and the odd ones."""
        lib = self.lib
        rng = np.random.default_rng(0)
        if not len(lib):
            return [Spectrum("warm-up", 0, 2, np.array([200.0, 300.0]), np.ones(2, np.float32), 500.0, (2,))]
        charges: tuple[tuple[int, ...], ...] = ((), (2, 3))
        out = []
        for k, e in enumerate(np.unique(rng.integers(0, len(lib), n)).tolist()):
            bins, values = lib.peaks(e)
            mz = (bins.astype(np.float64) + 0.5) * lib.params.bin_width
            z = (int(lib.charge[e]),) if k % 3 == 0 else charges[k % 2]
            out.append(Spectrum("warm-up", k, 2, mz, (values.astype(np.float32) ** 2) * 1e4,
                                float(lib.precursor_mz[e]), z))  # fmt: skip
        big = np.sort(rng.uniform(150, 2000, 5000))
        odd = [
            Spectrum("warm-up", 10_001, 2, np.zeros(0), np.zeros(0, np.float32), 600.0, (2,)),
            Spectrum("warm-up", 10_002, 2, big, rng.uniform(1, 9, 5000).astype(np.float32), 800.0, (3,)),
            Spectrum("warm-up", 10_003, 2, big[::50], np.ones(100, np.float32), 99_999.0, (4,)),
        ]
        for at, sp in zip(range(1, len(out), 16), odd, strict=False):
            out[at] = sp
        return out

    def reload(self) -> Reload | None:
        """How to rebuild a run's table elsewhere (``None``: the library was not loaded from a folder)."""
        return Reload("library", str(self.lib.folder), "f_value") if self.lib.folder is not None else None


class LibraryRun(LiveRun):
    """A `LiveRun` whose scored results also carry the library scores of their entry."""

    def add_scored(self, batch: ScoredBatch) -> list[dict[str, Any]]:
        results = super().add_scored(batch)
        f = batch.best.features
        cols = (f[:, _F["dot"]], f[:, _F["dot_bias"]], f[:, _F["delta_dot"]], f[:, _F["f_value"]])
        rows = zip(results, batch.best.peptide.tolist(), *(c.tolist() for c in cols), strict=True)
        for r, entry, dot, bias, delta, fv in rows:
            if entry >= 0:
                r.update(library_id=entry, dot=dot, dot_bias=bias, delta_dot=delta, f_value=fv)
        return results
