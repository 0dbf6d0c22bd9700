"""Spectral library search as a `SearchTarget`: a `SpectralLibrary` scored by `LibraryEngine`.

Matches are library entries (ids: their rank by precursor m/z); two entries of one
ProForma peptide (charges, replicates) are one peptide for peptide-level q-values.
A run's discriminant is a linear one over `LIBRARY_FEATURES`, started from
SpectraST's F-value as Percolator starts from its best single feature, with no
calibration. Every matched result also carries `RESULT_FIELDS`: the entry
(``library_id``) and its SpectraST scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.config import BackendName, Config, LibraryMode
from rtsearch.library.store import SpectralLibrary, load_library
from rtsearch.matches import ResultMessage, ScoredBatch
from rtsearch.scoring.backend import Backend, get_backend
from rtsearch.scoring.library.engine import LIBRARY_FEATURES, LibraryEngine
from rtsearch.search import warmup
from rtsearch.search.lda import fit
from rtsearch.search.target import Reopen, RunFit
from rtsearch.types import Spectrum, Tolerance


class LibraryResult(ResultMessage, total=False):
    """A library search's result message: the entry and its SpectraST scores besides the match."""

    library_id: int
    dot: float
    dot_bias: float
    delta_dot: float
    f_value: float


RESULT_FIELDS = tuple(k for k in LibraryResult.__annotations__ if k not in ResultMessage.__annotations__)
_F = {name: k for k, name in enumerate(LIBRARY_FEATURES)}


def precursor_window(cfg: Config, *, open_search: bool | None = None) -> tuple[Tolerance, tuple[int, ...]]:
    """Precursor tolerance and isotope errors: open search's window (on the mass), else ``[search]``'s."""
    if cfg.library.open if open_search is None else open_search:
        return Tolerance(cfg.library.open_window_da, "Da"), (0,)
    return cfg.search.precursor_tolerance, cfg.search.isotope_errors


class LibraryTarget:
    """A loaded `SpectralLibrary`, searched within ``tolerance`` on one backend."""

    kind: str = "library"
    features: tuple[str, ...] = LIBRARY_FEATURES
    primary: str = "f_value"
    learns: bool = True
    batch_limit: int | None = None  # offline batches as read (`SearchTarget.batch_limit`)
    result_fields: tuple[str, ...] = RESULT_FIELDS
    levels: tuple[str, str] = ("PSMs", "peptides")

    def __init__(
        self, lib: SpectralLibrary, tolerance: Tolerance, backend: Backend | None = None, *,
        isotope_errors: Sequence[int] = (0,), mode: LibraryMode = "auto",
    ) -> None:  # fmt: skip
        self.lib = lib
        self.engine = LibraryEngine(lib, tolerance, backend, isotope_errors=isotope_errors, mode=mode)
        self.backend = self.engine.backend

    @classmethod
    def open(
        cls, folder: str | Path, cfg: Config, backend: Backend | None = None, *, open_search: bool | None = None
    ) -> LibraryTarget:
        """The library in ``folder``, with ``cfg``'s precursor window (open search's with ``open_search``)."""
        tolerance, isotopes = precursor_window(cfg, open_search=open_search)
        return cls(load_library(folder), tolerance, backend, isotope_errors=isotopes, mode=cfg.library.gpu_mode)

    @property
    def entries(self) -> int:
        return len(self.lib)

    def device_bytes(self) -> int:
        return self.engine.device_bytes()

    def score(self, spectra: SpectraBatch) -> ScoredBatch:
        return self.engine.score(spectra)

    def reopen(self, backend: BackendName = "numpy") -> Reopen | None:
        e = self.engine
        args = (str(self.lib.folder), e.tolerance, e.isotope_errors, e.mode, backend)
        return Reopen(_open, args) if self.lib.folder is not None else None

    def is_decoy(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(self.lib.decoy[ids], dtype=bool)

    def peptides(self, ids: np.ndarray) -> list[str]:
        return self.lib.proformas(ids)

    def proteins(self, ids: np.ndarray) -> list[list[str]]:
        return self.lib.accessions(ids)

    def peptide_keys(self, ids: np.ndarray) -> np.ndarray:
        """The ProForma name of each entry: several entries (charges, replicates) are one peptide."""
        return np.array(self.lib.proformas(ids), dtype=object)

    def live_features(self, x: np.ndarray) -> np.ndarray:
        return x.copy()

    def fit_run(
        self, x: np.ndarray, decoy: np.ndarray, ids: np.ndarray, rt: np.ndarray, *, train: np.ndarray | None = None
    ) -> RunFit:
        """One linear discriminant from the F-value on, fitted on the matches that share a peak with their entry;
        the features are reported as scored. A match sharing none (dot 0) is no evidence: no score (q = 1). Fitted
        with them, a run with no true match (BSA1 against another organism's library) scored such matches above
        real ones (tests/e2e/test_negative_controls.py)."""
        filled = np.nan_to_num(x, nan=0.0)
        shares = filled[:, _F["dot"]] > 0
        rows = shares if train is None else shares & train
        disc = fit(filled[rows], decoy[rows], LIBRARY_FEATURES, start=self.primary)
        return RunFit(np.where(shares, disc.score(filled), np.nan), disc, x)

    def extra_fields(self, ids: np.ndarray, features: np.ndarray) -> dict[str, np.ndarray]:
        scores = {name: features[:, _F[name]] for name in RESULT_FIELDS[1:]}
        return {"library_id": ids, **scores}

    def warm_up_spectra(self, n: int) -> list[Spectrum]:
        """``n`` spectra made of library entries' own peaks, charges varied, and the odd ones."""
        lib = self.lib
        rng = np.random.default_rng(0)
        if not len(lib):
            return warmup.placeholder()
        charges: tuple[tuple[int, ...], ...] = ((), (2, 3))
        out = []
        for k, e in enumerate(np.unique(rng.integers(0, len(lib), n)).tolist()):
            bins, values = lib.peaks(e)
            mz = (bins.astype(np.float64) + 0.5) * lib.params.bin_width
            z = (int(lib.charge[e]),) if k % 3 == 0 else charges[k % 2]
            out.append(Spectrum(warmup.RUN, k, 2, mz, (values.astype(np.float32) ** 2) * 1e4,
                                float(lib.precursor_mz[e]), z))  # fmt: skip
        return warmup.with_odd_ones(out, rng)


def _open(
    folder: str, tolerance: Tolerance, isotopes: tuple[int, ...], mode: LibraryMode, backend: BackendName
) -> LibraryTarget:  # fmt: skip
    return LibraryTarget(load_library(folder), tolerance, get_backend(backend), isotope_errors=isotopes, mode=mode)

