"""A library search's table: scored batches of library matches, then the discriminant and q-values.

`LibraryTable` is `PsmTable` for spectral library search: per run, a linear
discriminant over `LIBRARY_FEATURES` (starting from SpectraST's F-value, as
Percolator starts from its best single feature) ranks the top hits, and
target-decoy q-values follow (`rtsearch.search.fdr`), for PSMs and for peptides
(distinct ProForma names). Its rows carry the database search's columns
(database-only features empty) plus ``library_id``, ``dot``, ``dot_bias``,
``delta_dot`` and ``f_value`` (`OUTPUT_COLUMNS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from rtsearch.library.store import SpectralLibrary
from rtsearch.search.fdr import peptide_q_values, q_values
from rtsearch.search.lda import fit
from rtsearch.search.table import COLUMNS, Arrivals

LIBRARY_FEATURES = ("f_value", "dot", "delta_dot", "dot_bias", "abs_ppm_error", "log_candidates", "matched_peaks")
LIBRARY_COLUMNS = ("library_id", "dot", "dot_bias", "delta_dot", "f_value")
# "dot" and "log_candidates" are database-search features too: the library's fill them, not a second column
OUTPUT_COLUMNS: tuple[str, ...] = COLUMNS + tuple(c for c in LIBRARY_COLUMNS if c not in COLUMNS)


@dataclass
class LibraryTable(Arrivals):
    """Every spectrum of one or more runs searched against ``lib``, in arrival order."""

    column_names: ClassVar[tuple[str, ...]] = OUTPUT_COLUMNS
    lib: SpectralLibrary  # ``peptide`` holds library entries
    primary: str = field(default="f_value", kw_only=True)
    _names: np.ndarray = field(default_factory=lambda: np.zeros(0, object), init=False, repr=False)  # ProForma

    def finalize(self) -> None:
        """Fit each run's discriminant, then score and compute q-values (per run)."""
        runs = np.array([r for b in self.batches for r in b.run], dtype=object)
        entry = self._cat("peptide").astype(np.int64)
        n = len(entry)
        feats = self._cat("features").reshape(n, len(LIBRARY_FEATURES))
        hit = entry >= 0
        decoy = hit & np.asarray(self.lib.decoy[np.where(hit, entry, 0)] if n else np.zeros(0, bool), dtype=bool)
        names = np.array([self.lib.peptides[e] if h else "-" for e, h in zip(entry.tolist(), hit.tolist(),
                                                                            strict=True)], dtype=object)  # fmt: skip
        score, q, pq = np.full(n, np.nan), np.ones(n), np.ones(n)
        for run in dict.fromkeys(runs.tolist()):
            rows = np.flatnonzero((runs == run) & hit)
            if rows.size == 0:
                continue
            x = np.nan_to_num(feats[rows], nan=0.0)
            disc = fit(x, decoy[rows], LIBRARY_FEATURES, start=self.primary)
            self.discriminants[run] = disc
            score[rows] = disc.score(x)
            q[rows] = q_values(score[rows], decoy[rows])
            pq[rows] = peptide_q_values(score[rows], decoy[rows], names[rows])
        self.score, self.q, self.peptide_q = score, q, pq
        self.peptide, self.decoy, self.features = entry, decoy, feats
        self._names = names

    def peptide_keys(self) -> np.ndarray:
        """The ProForma name of each spectrum's entry: several entries (charges, replicates) are one peptide."""
        return self._names

    def columns(self) -> dict[str, Any]:
        """`OUTPUT_COLUMNS`, each one array or list over every spectrum (NaN: empty), after `finalize`."""
        if self.score is None:
            self.finalize()
        assert self.score is not None and self.q is not None and self.peptide_q is not None
        assert self.peptide is not None and self.decoy is not None and self.features is not None
        entry, lib = self.peptide, self.lib
        hit = entry >= 0
        e = np.where(hit, entry, 0)
        n = len(entry)
        nan = np.full(n, np.nan)
        only_hits = lambda a: np.where(hit, a, nan)  # noqa: E731
        feat = {name: self.features[:, k] for k, name in enumerate(LIBRARY_FEATURES)}
        cols: dict[str, Any] = dict.fromkeys(COLUMNS, nan)  # database-only features: empty
        cols.update({
            "run": [r for b in self.batches for r in b.run],
            "scan": np.concatenate([b.scan for b in self.batches]) if self.batches else np.zeros(0, np.int64),
            "charge": np.where(hit, self._cat("charge"), 0).astype(np.int64),
            "precursor_mz": np.concatenate([b.precursor_mz for b in self.batches]) if self.batches else nan,
            "calc_mz": only_hits(self._cat("calc_mz")), "ppm_error": only_hits(self._cat("ppm_error")),
            "peptide": [lib.peptides[i] if h else "" for i, h in zip(e.tolist(), hit.tolist(), strict=True)],
            "proteins": [lib.proteins[i] if h else "" for i, h in zip(e.tolist(), hit.tolist(), strict=True)],
            "is_decoy": self.decoy, "score": only_hits(self.score), "q_value": only_hits(self.q),
            "peptide_q_value": only_hits(self.peptide_q),
            "matched_peaks": np.where(hit, self._cat("matched_peaks"), 0).astype(np.int64),
            "reason": [r if not h else "" for r, h in zip((r for b in self.batches for r in b.reason),
                                                          hit.tolist(), strict=True)],
            "library_id": entry, "dot": only_hits(feat["dot"]), "dot_bias": only_hits(feat["dot_bias"]),
            "delta_dot": only_hits(feat["delta_dot"]), "f_value": only_hits(feat["f_value"]),
            "log_candidates": only_hits(feat["log_candidates"]),
        })  # fmt: skip
        return {c: cols[c] for c in OUTPUT_COLUMNS}
