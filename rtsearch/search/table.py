"""A run's PSM table: scored batches accumulated, then the discriminant and q-values.

`PsmTable` keeps the scored batches of one or more runs in arrival order, for
any `SearchTarget`. `PsmTable.finalize` fits each run's discriminant
(`SearchTarget.fit_run`) on each spectrum's best match, scores every PSM with it
and computes PSM- and peptide-level q-values (`rtsearch.search.fdr`) over the best
matches; `PsmTable.columns` gives the results file's columns: `RESULT_COLUMNS`,
the target's ``result_fields``, then its features not already among them. With
`[search] ranks` > 1 a spectrum's lower-ranked matches follow its best as rows of
their own (``rank`` 2, 3, ...), scored by the run's discriminant, without q-values
or PEP: the error rate is controlled over each spectrum's best match, as Comet and
Sage do; lower ranks are there for rescoring elsewhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rtsearch.matches import RESULT_COLUMNS, ScoredBatch, concat_batches, lower_ranks
from rtsearch.search.crossfit import cross_fit
from rtsearch.search.fdr import peps, peptide_q_values, q_values
from rtsearch.search.lda import Discriminant
from rtsearch.search.target import SearchTarget

COMPACT_EVERY = 64  # small batches merged into one (`PsmTable.add`)


def result_columns(target: SearchTarget) -> tuple[str, ...]:
    """The columns of a results file of ``target``'s kind."""
    head = RESULT_COLUMNS + tuple(c for c in target.result_fields if c not in RESULT_COLUMNS)
    return head + tuple(f for f in target.features if f not in head)


class PsmTable:
    """Every spectrum of one or more runs searched against ``target``, in arrival order."""

    def __init__(self, target: SearchTarget) -> None:
        self.target = target
        self.column_names = result_columns(target)
        self.batches: list[ScoredBatch] = []
        self.attached: dict[str, np.ndarray] = {}  # columns added after scoring (`attach`), one value a row
        self.discriminants: dict[str, Discriminant] = {}
        # set by finalize, one entry per spectrum: match id (-1 none), decoy flag, reported features,
        # the run's discriminant score, PSM- and peptide-level q-values
        self.match: np.ndarray | None = None
        self.decoy: np.ndarray | None = None
        self.features: np.ndarray | None = None
        self.score: np.ndarray | None = None
        self.q: np.ndarray | None = None
        self.peptide_q: np.ndarray | None = None
        self.pep: np.ndarray | None = None
        self.lower: LowerRanks | None = None  # set by finalize: the matched lower-ranked PSMs
        self._small = 0  # small batches at the end of ``batches``

    def add(self, batch: ScoredBatch) -> None:
        self.batches.append(batch)
        # a live run adds batches of a few spectra thousands of times: every COMPACT_EVERY small ones
        # become one, so the table holds few Python objects (full GC passes stay short) and few parts
        self._small = self._small + 1 if len(batch) < COMPACT_EVERY else 0
        if self._small == COMPACT_EVERY:
            self.batches[-COMPACT_EVERY:] = [concat_batches(self.batches[-COMPACT_EVERY:])]
            self._small = 0

    def __len__(self) -> int:
        return sum(len(b) for b in self.batches)

    def attach(self, name: str, values: np.ndarray) -> None:
        """A column of one value a row (in arrival order) added after the others, e.g. MS1 elution."""
        if values.shape[0] != len(self):
            raise ValueError(f"column {name}: {values.shape[0]} values for {len(self)} rows")
        if name not in self.column_names:
            self.column_names = (*self.column_names, name)
        self.attached[name] = values

    def rows(self, attr: str) -> np.ndarray:
        """A spectrum attribute of every row (``run``, ``scan``, ``precursor_mz``, ``rt``), in arrival order."""
        if attr == "run":
            return np.array([r for b in self.batches for r in b.run], dtype=object)
        return np.concatenate([getattr(b, attr) for b in self.batches]) if self.batches else np.zeros(0)

    def _cat(self, attr: str) -> np.ndarray:
        return np.concatenate([getattr(b.best, attr) for b in self.batches]) if self.batches else np.zeros(0)

    def finalize(self) -> None:
        """Fit each run's discriminant, then score and compute q-values (per run)."""
        t = self.target
        runs = np.array([r for b in self.batches for r in b.run], dtype=object)
        match = self._cat("match").astype(np.int64)
        n = len(match)
        feats = self._cat("features").reshape(n, len(t.features))
        rts = np.concatenate([b.rt for b in self.batches]) if self.batches else np.zeros(0)
        scans, mz = self.rows("scan"), self.rows("precursor_mz")
        hit = match >= 0
        decoy = np.zeros(n, dtype=bool)
        decoy[hit] = t.is_decoy(match[hit])
        low = LowerRanks.of(self.batches, t)
        score, q, pq, pep = np.full(n, np.nan), np.ones(n), np.ones(n), np.ones(n)
        for run in dict.fromkeys(runs.tolist()):
            rows = np.flatnonzero((runs == run) & hit)
            if rows.size == 0:
                continue
            more = np.flatnonzero(runs[low.row] == run)
            ids = np.r_[match[rows], low.match[more]]
            place = np.argsort(np.lexsort((rts[rows], mz[rows], scans[rows])))  # not the order they were answered in
            fitted = cross_fit(t, np.r_[feats[rows], low.features[more]], np.r_[decoy[rows], low.decoy[more]], ids,
                               np.r_[rts[rows], rts[low.row[more]]],
                               best=rows.size, of_best=np.searchsorted(rows, low.row[more]),
                               place=place)  # fmt: skip
            feats[rows], low.features[more] = fitted.features[: rows.size], fitted.features[rows.size :]
            self.discriminants[run] = fitted.discriminant
            score[rows], low.score[more] = fitted.score[: rows.size], fitted.score[rows.size :]
            q[rows] = q_values(score[rows], decoy[rows])
            pq[rows] = peptide_q_values(score[rows], decoy[rows], t.peptide_keys(match[rows]))
            pep[rows] = peps(score[rows], decoy[rows])
        self.score, self.q, self.peptide_q, self.pep = score, q, pq, pep
        self.match, self.decoy, self.features = match, decoy, feats
        self.lower = low

    def finalize_without_fdr(self) -> None:
        """Each row as scored, without a discriminant score, q-values or PEP (NaN), lower ranks left out: what a run
        whose `finalize` failed can still write."""
        t = self.target
        match = self._cat("match").astype(np.int64)
        n = len(match)
        hit = match >= 0
        decoy = np.zeros(n, dtype=bool)
        decoy[hit] = t.is_decoy(match[hit])
        self.match, self.decoy = match, decoy
        self.features = self._cat("features").reshape(n, len(t.features))
        self.score, self.q, self.peptide_q, self.pep = (np.full(n, np.nan) for _ in range(4))
        self.lower = None

    def _finalized(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self.q is None:
            self.finalize()
        assert self.match is not None and self.decoy is not None and self.features is not None
        assert self.score is not None and self.q is not None and self.peptide_q is not None
        return self.match, self.decoy, self.features, self.score, self.q, self.peptide_q

    def counts_at(self, level: float = 0.01) -> tuple[int, int]:
        """Target PSMs and distinct target peptides at ``level`` FDR (finalizes first if needed)."""
        match, decoy, _, _, q, pq = self._finalized()
        target = (match >= 0) & ~decoy
        psms = int(np.sum(target & (q <= level)))
        peptides = int(np.unique(self.target.peptide_keys(match[target & (pq <= level)])).shape[0])
        return psms, peptides

    def columns(self) -> dict[str, Any]:
        """`column_names`, each as one array or list over every spectrum (NaN: empty), after `finalize`.

        Column-wise so that writing a run's file is array work, not a Python loop over cells.
        """
        match, decoy, feats, score, q, pq = self._finalized()
        t = self.target
        hit = match >= 0
        nan = np.full(len(match), np.nan)
        only_hits = lambda a: np.where(hit, a, nan)  # noqa: E731
        as_int = lambda a: np.where(hit, a, 0).astype(np.int64)  # noqa: E731
        matched = hit.tolist()
        if self.batches and all(b.names is not None for b in self.batches):  # named while scoring
            peptide = [p for b in self.batches for p in b.names.peptides]  # type: ignore[union-attr]
            proteins = [";".join(p) for b in self.batches for p in b.names.proteins]  # type: ignore[union-attr]
        else:
            names, accessions = iter(t.peptides(match[hit])), iter(t.proteins(match[hit]))
            peptide = [next(names) if h else "" for h in matched]
            proteins = [";".join(next(accessions)) if h else "" for h in matched]
        cols: dict[str, Any] = {
            "run": [r for b in self.batches for r in b.run],
            "scan": np.concatenate([b.scan for b in self.batches]) if self.batches else np.zeros(0, np.int64),
            "spectrum_id": [n for b in self.batches for n in b.ids()],
            "charge": as_int(self._cat("charge")),
            "precursor_mz": np.concatenate([b.precursor_mz for b in self.batches]) if self.batches else nan,
            "rt": np.concatenate([b.rt for b in self.batches]) if self.batches else nan,
            "calc_mz": only_hits(self._cat("calc_mz")),
            "ppm_error": only_hits(self._cat("ppm_error")),
            "peptide": peptide,
            "proteins": proteins,
            "is_decoy": decoy & hit,
            "score": only_hits(score),
            "q_value": only_hits(q),
            "peptide_q_value": only_hits(pq),
            "pep": only_hits(self.pep),
            "matched_peaks": as_int(self._cat("matched_peaks")),
            "reason": [r if not h else "" for r, h in zip((r for b in self.batches for r in b.reason), matched,
                                                          strict=True)],  # fmt: skip
        }
        for name, values in t.extra_fields(match, feats).items():
            cols.setdefault(name, only_hits(values) if values.dtype.kind == "f" else values)
        for k, name in enumerate(t.features):
            cols.setdefault(name, only_hits(feats[:, k]))
        cols.update(self.attached)
        cols["rank"] = np.ones(len(match), np.int64)
        cols = {c: cols[c] for c in self.column_names}
        return self.lower.interleave(cols, t) if self.lower is not None and len(self.lower.row) else cols


class LowerRanks:
    """The lower-ranked matches (rank 2, 3, ...) of a table's spectra that have one: per PSM its spectrum's row in
    the table, its rank, match, decoy flag, features (calibrated once fitted) and the run's discriminant score."""

    def __init__(self, row: np.ndarray, rank: np.ndarray, n_features: int) -> None:
        self.row, self.rank = row, rank
        self.match = np.zeros(0, np.int64)
        self.features = np.zeros((0, n_features))
        self.charge = self.matched_peaks = np.zeros(0, np.int64)
        self.calc_mz = self.ppm_error = np.zeros(0)
        self.decoy = np.zeros(0, bool)
        self.score = np.full(row.shape[0], np.nan)

    @classmethod
    def of(cls, batches: list[ScoredBatch], target: SearchTarget) -> LowerRanks:
        """The matched lower ranks of ``batches``, by rank, then row."""
        ranks = lower_ranks(batches)
        hits = [np.flatnonzero(b.match >= 0) for b in ranks]
        out = cls(np.concatenate([np.zeros(0, np.int64), *hits]),
                  np.concatenate([np.zeros(0, np.int64), *(np.full(h.size, r + 2) for r, h in enumerate(hits))]),
                  len(target.features))  # fmt: skip
        if ranks:
            for name in ("match", "features", "charge", "matched_peaks", "calc_mz", "ppm_error"):
                setattr(out, name, np.concatenate([getattr(b, name)[h] for b, h in zip(ranks, hits, strict=True)]))
            out.decoy = target.is_decoy(out.match) if out.match.size else np.zeros(0, bool)
        return out

    def interleave(self, cols: dict[str, Any], target: SearchTarget) -> dict[str, Any]:
        """``cols`` (one row a spectrum, its best match) with these PSMs' rows after their spectrum's, by rank."""
        at, n = self.row, len(cols["run"])
        feats = dict(zip(target.features, self.features.T, strict=True))
        extra = target.extra_fields(self.match, self.features)
        nan = np.full(at.shape[0], np.nan)
        own: dict[str, Any] = {
            "rank": self.rank, "charge": self.charge, "calc_mz": self.calc_mz, "ppm_error": self.ppm_error,
            "peptide": target.peptides(self.match), "proteins": [";".join(p) for p in target.proteins(self.match)],
            "is_decoy": self.decoy, "score": self.score, "q_value": nan, "peptide_q_value": nan, "pep": nan,
            "matched_peaks": self.matched_peaks, "reason": [""] * at.shape[0], **extra, **feats}  # fmt: skip
        order = np.lexsort((np.r_[np.ones(n, np.int64), self.rank], np.r_[np.arange(n), at]))
        out: dict[str, Any] = {}
        for name, values in cols.items():
            mine = own[name] if name in own else (
                [values[i] for i in at.tolist()] if isinstance(values, list) else np.asarray(values)[at])  # fmt: skip
            if isinstance(values, list):
                both = values + list(mine)
                out[name] = [both[i] for i in order.tolist()]
            else:
                values = np.asarray(values)
                out[name] = np.concatenate([values, np.asarray(mine, dtype=values.dtype)])[order]
        return out
