"""`SearchTarget`: what the daemon, its refit process and offline search need of whatever is searched.

A search kind is one class implementing this protocol in its own module
(`rtsearch.search.database`: a peptide index; `rtsearch.search.library`: a
spectral library). `LiveRun`, `PsmTable`, `search_runs`, the daemon and its
metrics take any of them as they are; nothing outside a kind's modules knows
which kind it is.

A target

- **scores**: ``score(SpectraBatch) -> ScoredBatch``, synchronous, on its backend: every
  spectrum's best match (an id among the target's ``entries``, -1 none) and its
  ``features`` (named, in order; ``primary`` ranks a run until its discriminant is fitted);
- **names its matches**: decoy flags, ProForma peptides, protein accessions, and the key that
  makes two matches one peptide (for peptide-level q-values);
- **rescores a run**: ``live_features`` (what running q-values rank on: features known
  without the whole run) and ``fit_run`` (the run's discriminant at its end, with whatever
  calibration the kind does);
- **adds its own result fields** (``result_fields``, ``extra_fields``), on the wire and in files;
- **warms up** (``warm_up_spectra``: spectra that take every scoring path, so no kernel
  compiles on a real spectrum's latency) and **reopens** elsewhere (``reopen``: a picklable
  call that opens the same target, on NumPy, in the daemon's refit process).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.config import BackendName
from rtsearch.matches import ScoredBatch
from rtsearch.scoring.backend import Backend
from rtsearch.search.lda import Discriminant
from rtsearch.types import Spectrum


@dataclass(frozen=True)
class Reopen:
    """``opener(*args)``: a picklable, hashable way to open a target again in another process.

    ``opener`` is a module-level function (pickled by name); the refit process keeps what it
    opened under this key, so a target is loaded there once however many runs finish.
    """

    opener: Callable[..., SearchTarget]
    args: tuple[Any, ...]

    def __call__(self) -> SearchTarget:
        return self.opener(*self.args)


@dataclass
class RunFit:
    """A run's discriminant, fitted at its end: the score of each PSM and the features to report."""

    score: np.ndarray  # float64 [N]
    discriminant: Discriminant
    features: np.ndarray  # float64 [N, F]: as reported (calibrated where the kind calibrates)


class SearchTarget(Protocol):
    """A loaded target of one search kind (see the module docstring)."""

    kind: str  # short name for logs and the ``rtsearch_build_info`` metric
    backend: Backend
    features: tuple[str, ...]  # names of ``ScoredBatch.best.features``' columns
    primary: str  # one of ``features``: what a run ranks by before its discriminant
    result_fields: tuple[str, ...]  # fields this kind adds to every matched result (wire and file)
    levels: tuple[str, str]  # what its two FDR levels count, for summaries: ("PSMs", "peptides"), ("PrSMs", …)
    learns: bool  # whether ``fit_run`` fits the run's own PSMs (then cross-fitted: `rtsearch.search.crossfit`)

    @property
    def batch_limit(self) -> int | None:
        """Spectra an offline batch at most (None: as read), where one spectrum costs seconds: progress and Ctrl-C
        then come between spectra, not after a whole file."""
        ...

    @property
    def entries(self) -> int:
        """Entries searched (targets and decoys)."""
        ...

    def device_bytes(self) -> int:
        """Bytes of target data on the device (0 on NumPy)."""
        ...

    def score(self, spectra: SpectraBatch) -> ScoredBatch: ...

    def warm_up_spectra(self, n: int) -> list[Spectrum]: ...

    def reopen(self, backend: BackendName = "numpy") -> Reopen | None:
        """A picklable call opening this target on ``backend`` in another process; ``None``: it has no folder."""
        ...

    def is_decoy(self, ids: np.ndarray) -> np.ndarray: ...

    def peptides(self, ids: np.ndarray) -> list[str]:
        """ProForma of each match."""
        ...

    def proteins(self, ids: np.ndarray) -> list[list[str]]:
        """Protein accessions of each match."""
        ...

    def peptide_keys(self, ids: np.ndarray) -> np.ndarray:
        """What makes two matches one peptide (peptide-level FDR), per match."""
        ...

    def live_features(self, x: np.ndarray) -> np.ndarray:
        """Features for running q-values (a new array): those that need no whole run to compute."""
        ...

    def fit_run(
        self, x: np.ndarray, decoy: np.ndarray, ids: np.ndarray, rt: np.ndarray, *, train: np.ndarray | None = None
    ) -> RunFit:
        """The discriminant of one run's matched spectra (features ``x``, decoy flags, match ids, RT), fitted on the
        rows ``train`` (a mask; every row when None: a spectrum's lower-ranked matches are scored, not fitted on)."""
        ...

    def extra_fields(self, ids: np.ndarray, features: np.ndarray) -> dict[str, np.ndarray]:
        """``result_fields`` of matches ``ids`` with ``features``, one array each."""
        ...
