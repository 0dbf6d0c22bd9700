"""A run's PSM table: scored batches accumulated, then the discriminant and q-values.

`PsmTable.finalize` fits the run's linear discriminant on its top PSMs
(targets vs decoys), scores every PSM with it and computes PSM- and
peptide-level q-values. `PsmTable.rows` gives the result columns of the
offline search (and of the daemon's results file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from rtsearch.database.index import PeptideIndex
from rtsearch.scoring.database.engine import ScoredBatch, concat_batches
from rtsearch.scoring.database.features import FEATURES
from rtsearch.scoring.database.retention import rt_error
from rtsearch.search.fdr import peptide_q_values, q_values
from rtsearch.search.lda import Discriminant, fit

BASE_COLUMNS: tuple[str, ...] = (
    "run", "scan", "charge", "precursor_mz", "calc_mz", "ppm_error", "peptide", "proteins",
    "is_decoy", "score", "q_value", "peptide_q_value", "matched_peaks", "reason",
)  # fmt: skip
# the result columns, then every feature not already among them
COLUMNS: tuple[str, ...] = BASE_COLUMNS + tuple(f for f in FEATURES if f not in BASE_COLUMNS)


def recenter_ppm(feats: np.ndarray, rows: np.ndarray, good: np.ndarray) -> None:
    """Express the precursor error against the run's own offset and spread, in place.

    Offset and spread (median, 1.4826·MAD, at least 0.5 ppm) come from the
    confident targets ``good`` (a mask over ``rows``): a calibration, since instruments drift by a few ppm. The
    ``ppm_error_z2`` feature becomes the squared z-score of the error
    (capped at 25): the log-likelihood ratio of a Gaussian error for a right
    match against a uniform one for a random match, up to a constant.
    """
    col = FEATURES.index("ppm_error_z2")
    signed = feats[rows, FEATURES.index("signed_ppm_error")]
    offset = float(np.median(signed[good])) if good.any() else 0.0
    spread = 1.4826 * float(np.median(np.abs(signed[good] - offset))) if good.any() else 1.0
    spread = max(spread, 0.5)
    feats[rows, col] = np.minimum(((signed - offset) / spread) ** 2, 25.0)


def confident(score: np.ndarray, decoy: np.ndarray, *, minimum: int = 10) -> np.ndarray:
    """Targets accepted at 1 % FDR, or the ``minimum`` best targets when fewer are."""
    good = (q_values(score, decoy) <= 0.01) & ~decoy
    if good.sum() < minimum:
        targets = np.flatnonzero(~decoy)
        good = np.zeros(score.shape[0], dtype=bool)
        good[targets[np.argsort(-score[targets], kind="stable")[:minimum]]] = True
    return good


COMPACT_EVERY = 64  # small batches merged into one (`PsmTable.add`)


class Searched(Protocol):
    """What a run's results need from what was searched (`PeptideIndex`, `SpectralLibrary`), by match id."""

    def is_decoy(self, i: np.ndarray) -> Any: ...

    def proformas(self, ids: np.ndarray) -> list[str]: ...

    def accessions(self, ids: np.ndarray) -> list[list[str]]: ...


class RunTable(Protocol):
    """A run's table as `LiveRun`, the daemon and the results writer use it (`PsmTable`, `LibraryTable`)."""

    column_names: ClassVar[tuple[str, ...]]
    batches: list[ScoredBatch]
    peptide: np.ndarray | None

    def add(self, batch: ScoredBatch) -> None: ...

    def finalize(self) -> None: ...

    def counts_at(self, level: float = 0.01) -> tuple[int, int]: ...

    def columns(self) -> dict[str, Any]: ...


@dataclass(kw_only=True)
class Arrivals:
    """Scored batches in arrival order, small ones compacted; the counts at an FDR once finalized.

    The part `PsmTable` and `LibraryTable` share; each adds what it searched, ``finalize`` and ``columns``.
    """

    primary: str = "hyperscore"
    batches: list[ScoredBatch] = field(default_factory=list)
    score: np.ndarray | None = None
    q: np.ndarray | None = None
    peptide_q: np.ndarray | None = None
    discriminants: dict[str, Discriminant] = field(default_factory=dict)
    # set by finalize, one entry per spectrum: match id (-1 none), decoy flag, final features
    peptide: np.ndarray | None = None
    decoy: np.ndarray | None = None
    features: np.ndarray | None = None
    _small: int = field(default=0, init=False, repr=False)  # small batches at the end of ``batches``

    def finalize(self) -> None:
        raise NotImplementedError

    def add(self, batch: ScoredBatch) -> None:
        self.batches.append(batch)
        # a live run adds batches of a few spectra thousands of times: every COMPACT_EVERY small ones
        # become one, so the table holds few Python objects (full GC passes stay short) and few parts
        self._small = self._small + 1 if len(batch) < COMPACT_EVERY else 0
        if self._small == COMPACT_EVERY:
            self.batches[-COMPACT_EVERY:] = [concat_batches(self.batches[-COMPACT_EVERY:])]
            self._small = 0

    def _cat(self, attr: str) -> np.ndarray:
        return np.concatenate([getattr(b.best, attr) for b in self.batches]) if self.batches else np.zeros(0)

    def __len__(self) -> int:
        return sum(len(b) for b in self.batches)

    def counts_at(self, level: float = 0.01) -> tuple[int, int]:
        """Target PSMs and distinct target peptides at ``level`` FDR, after `finalize`."""
        if self.q is None:
            self.finalize()
        assert self.q is not None and self.peptide_q is not None and self.peptide is not None
        assert self.decoy is not None
        target = (self.peptide >= 0) & ~self.decoy
        psms = int(np.sum(target & (self.q <= level)))
        peptides = int(np.unique(self.peptide_keys()[target & (self.peptide_q <= level)]).shape[0])
        return psms, peptides

    def peptide_keys(self) -> np.ndarray:
        """What makes two spectra's matches one peptide, per spectrum (here: the match id)."""
        assert self.peptide is not None
        return self.peptide


@dataclass
class PsmTable(Arrivals):
    """Every spectrum of one or more runs, in arrival order (database search)."""

    column_names: ClassVar[tuple[str, ...]] = COLUMNS
    index: PeptideIndex

    def finalize(self) -> None:
        """Fit each run's discriminant, then score and compute q-values (per run)."""
        runs = np.array([r for b in self.batches for r in b.run], dtype=object)
        pep = self._cat("peptide").astype(np.int64)
        feats = self._cat("features").reshape(len(pep), len(FEATURES))
        rts = np.concatenate([b.rt for b in self.batches]) if self.batches else np.zeros(0)
        scored = pep >= 0
        decoy = np.zeros(len(pep), dtype=bool)
        decoy[scored] = np.asarray(self.index.is_decoy(pep[scored]), dtype=bool)
        score = np.full(len(pep), np.nan)
        q = np.ones(len(pep))
        pq = np.ones(len(pep))
        for run in dict.fromkeys(runs.tolist()):
            rows = np.flatnonzero((runs == run) & scored)
            if rows.size == 0:
                continue
            # first pass on |ppm|; recenter_ppm then calibrates it
            feats[rows, FEATURES.index("ppm_error_z2")] = np.abs(feats[rows, FEATURES.index("signed_ppm_error")])
            disc = fit(feats[rows], decoy[rows], FEATURES, start=self.primary)
            # second pass: mass and retention time calibrated on the first pass's confident targets
            good = confident(disc.score(feats[rows]), decoy[rows])
            recenter_ppm(feats, rows, good)
            feats[rows, FEATURES.index("rt_error")] = rt_error(self.index, pep[rows], rts[rows], good)
            disc = fit(feats[rows], decoy[rows], FEATURES, start=self.primary)
            self.discriminants[run] = disc
            score[rows] = disc.score(feats[rows])
            q[rows] = q_values(score[rows], decoy[rows])
            pq[rows] = peptide_q_values(score[rows], decoy[rows], pep[rows])
        self.score, self.q, self.peptide_q = score, q, pq
        self.peptide, self.decoy, self.features = pep, decoy, feats

    def columns(self) -> dict[str, Any]:
        """The `COLUMNS`, each as one array or list over every spectrum (NaN: empty), after `finalize`.

        Column-wise so that writing a run's file is array work, not a Python loop over cells.
        """
        if self.score is None:
            self.finalize()
        assert self.score is not None and self.q is not None and self.peptide_q is not None
        assert self.decoy is not None and self.features is not None and self.peptide is not None
        pep = self.peptide
        scored = pep >= 0
        nan = np.full(len(pep), np.nan)

        def cat(attr: str) -> np.ndarray:
            return self._cat(attr) if self.batches else np.zeros(0)

        reasons = [r for b in self.batches for r in b.reason]
        peps = pep.tolist()
        hits = pep[scored]
        names, proteins = iter(self.index.proformas(hits)), iter(self.index.accessions(hits))
        cols: dict[str, Any] = {
            "run": [r for b in self.batches for r in b.run],
            "scan": np.concatenate([b.scan for b in self.batches]) if self.batches else np.zeros(0, np.int64),
            "charge": np.where(scored, cat("charge"), 0).astype(np.int64),
            "precursor_mz": np.concatenate([b.precursor_mz for b in self.batches]) if self.batches else nan,
            "calc_mz": np.where(scored, cat("calc_mz"), nan),
            "ppm_error": np.where(scored, cat("ppm_error"), nan),
            "peptide": [next(names) if p >= 0 else "" for p in peps],
            "proteins": [";".join(next(proteins)) if p >= 0 else "" for p in peps],
            "is_decoy": self.decoy & scored,
            "score": np.where(scored, self.score, nan),
            "q_value": np.where(scored, self.q, nan),
            "peptide_q_value": np.where(scored, self.peptide_q, nan),
            "matched_peaks": np.where(scored, cat("matched_peaks"), 0).astype(np.int64),
            "reason": [r if p < 0 else "" for r, p in zip(reasons, peps, strict=True)],
        }  # fmt: skip
        for k, name in enumerate(FEATURES):
            if name not in cols:
                cols[name] = np.where(scored, self.features[:, k], nan)
        return {c: cols[c] for c in COLUMNS}
