"""A run being acquired: per-spectrum results with running q-values, then the end-of-run table.

`LiveRun` is core logic with no I/O: the daemon hands it each scored batch
and gets back one result (a plain dict in the wire protocol's result fields)
per spectrum; spectra that were shed or invalid are recorded with their
reason. At the end `LiveRun.finish` fits the run's discriminant and final
q-values exactly as the offline search does (`rtsearch.search.table.PsmTable`).

Running q-values rank by the primary score until ``REFIT_FIRST`` spectra of the
run are scored; then by the run's own discriminant, fitted on everything so
far (uncalibrated features: |ppm| instead of the run's z-score, no retention
time) and refitted whenever the count doubles up to ``REFIT_LAST``, with every
PSM so far re-ranked. With ``refits="inline"`` the refit runs inside the
`add_scored` call that crosses the count; with ``refits="deferred"`` (the
daemon) `LiveRun.refit_due` hands it out to run elsewhere, off the scoring
path, and `LiveRun.install` brings the result back. ``q_refresh`` is
`RunningFdr`'s: the daemon lets a batch read its q-values off a curve at most
1 % of the run old rather than pay a pass over the run per spectrum.
The primary score alone separates poorly on large databases; the discriminant
is what the end of the run uses, so live identifications approach the final ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rtsearch.scoring.database.engine import ScoredBatch
from rtsearch.scoring.database.features import FEATURES, BestMatches
from rtsearch.search.fdr import RunningFdr
from rtsearch.search.lda import Discriminant, fit
from rtsearch.search.table import PsmTable, RunTable, Searched
from rtsearch.types import ResultStatus

IDENTIFIED_AT = 0.01  # running q-value at which a target PSM is reported as identified
REFIT_FIRST = 500  # scored spectra before the first live discriminant; refitted at every doubling after
REFIT_LAST = 8000  # no refits beyond this: the fit stabilizes, and its cost grows with the run


def unscored_batch(
    run: str, scans: Sequence[int], precursor_mz: Sequence[float], reasons: Sequence[str], *,
    n_features: int = len(FEATURES),
) -> ScoredBatch:  # fmt: skip
    """A `ScoredBatch` of spectra that were never scored (shed, invalid), with their reasons."""
    n = len(scans)
    best = BestMatches(
        peptide=np.full(n, -1, np.int64), charge=np.zeros(n, np.int64), calc_mz=np.full(n, np.nan),
        ppm_error=np.full(n, np.nan), matched_peaks=np.zeros(n, np.int64),
        features=np.full((n, n_features), np.nan),
    )  # fmt: skip
    return ScoredBatch(
        run=[run] * n, scan=np.asarray(scans, np.int64), precursor_mz=np.asarray(precursor_mz, np.float64),
        rt=np.zeros(n), best=best, reason=list(reasons),
    )  # fmt: skip


@dataclass
class RunSummary:
    """What a finished run amounts to (published on MQTT, printed by the demo)."""

    run: str
    spectra: int
    scored: int
    identified_running: int
    psms_at_1pct: int
    peptides_at_1pct: int
    by_status: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run, "spectra": self.spectra, "scored": self.scored,
            "identified_running": self.identified_running, "psms_at_1pct": self.psms_at_1pct,
            "peptides_at_1pct": self.peptides_at_1pct, "by_status": dict(self.by_status),
        }  # fmt: skip


class LiveRun:
    """Results of one run as its spectra are scored; see the module docstring.

    ``index`` names the matches; ``table`` (a `PsmTable` of ``index`` unless given: library
    search passes a `LibraryTable`) keeps the run for its end; ``features`` names the
    columns of the scored batches' features (database search's `FEATURES` unless given).
    """

    def __init__(
        self,
        name: str,
        index: Searched,
        *,
        primary: str = "hyperscore",
        refits: Literal["inline", "deferred"] = "inline",
        q_refresh: float = 0.0,
        table: RunTable | None = None,
        features: tuple[str, ...] = FEATURES,
    ) -> None:
        self.name = name
        self.index = index
        self.primary = primary
        self.refits = refits
        self.q_refresh = q_refresh
        self.features = features
        if table is None:
            from rtsearch.database.index import PeptideIndex

            assert isinstance(index, PeptideIndex), "a PsmTable needs a PeptideIndex; pass table= otherwise"
            table = PsmTable(index, primary=primary)
        self.table = table
        self.fdr = RunningFdr(refresh=q_refresh)
        self.by_status: dict[str, int] = dict.fromkeys((s.value for s in ResultStatus), 0)
        self._col = features.index(primary)
        # database search's live ppm feature: |ppm| until the run's calibration at its end
        self._ppm = (features.index("ppm_error_z2"), features.index("signed_ppm_error")) \
            if "ppm_error_z2" in features else None  # fmt: skip
        self._x: list[np.ndarray] = []  # live features of every scored PSM so far
        self._d: list[np.ndarray] = []
        self._n_scored = 0
        self._next_fit = REFIT_FIRST
        self._fitting = False
        self.discriminant: Discriminant | None = None

    def _running_q(self, feats: np.ndarray, decoy: np.ndarray) -> np.ndarray:
        """Running q-values of new scored PSMs (see the module docstring)."""
        x = feats.copy()
        if self._ppm is not None:
            x[:, self._ppm[0]] = np.abs(x[:, self._ppm[1]])
        self._n_scored += len(x)
        if self._next_fit <= REFIT_LAST or self._fitting:  # kept only while a refit will read them
            self._x.append(x)
            self._d.append(decoy)
        if self.refits == "inline" and (refit := self.refit_due()) is not None:
            return self.install(refit())[-len(x) :]  # every PSM re-ranked, this batch's read off
        s = self.discriminant.score(x) if self.discriminant is not None else x[:, self._col]
        return self.fdr.add(s, decoy)

    def refit_due(self) -> Callable[[], Discriminant] | None:
        """The live discriminant's refit when the run has grown enough (``None``: not now).

        The returned call fits on every PSM so far and may run elsewhere (the daemon: another
        process), off the scoring path (``refits="deferred"``); hand its result to `install`. Until then the
        run keeps ranking by the discriminant it has.
        """
        if self._fitting or self._next_fit > REFIT_LAST or self._n_scored < self._next_fit:
            return None
        all_x, all_d = np.concatenate(self._x), np.concatenate(self._d)
        self._x, self._d = [all_x], [all_d]
        while self._next_fit <= self._n_scored:
            self._next_fit *= 2
        self._fitting = True
        return functools.partial(fit, all_x, all_d, self.features, start=self.primary)

    def install(self, discriminant: Discriminant | None) -> np.ndarray:
        """Rank every PSM so far by a refitted ``discriminant``; their q-values, in scoring order.

        ``None`` (the refit failed) keeps the discriminant the run has.
        """
        self._fitting = False
        all_x, all_d = np.concatenate(self._x), np.concatenate(self._d)
        self._x, self._d = ([all_x], [all_d]) if self._next_fit <= REFIT_LAST else ([], [])
        if discriminant is None:
            return np.ones(0)
        self.discriminant = discriminant
        self.fdr = RunningFdr(refresh=self.q_refresh)
        return self.fdr.add(discriminant.score(all_x), all_d)

    @property
    def answered(self) -> int:
        return sum(self.by_status.values())

    def add_scored(self, batch: ScoredBatch) -> list[dict[str, Any]]:
        """One result dict per spectrum of ``batch`` (all of this run), running q-values included."""
        self.table.add(batch)
        best = batch.best
        pep = best.peptide
        scored = pep >= 0
        raw = np.where(scored, best.features[:, self._col], np.nan)
        decoy = np.zeros(len(pep), dtype=bool)
        decoy[scored] = np.asarray(self.index.is_decoy(pep[scored]), dtype=bool)
        q = np.ones(len(pep))
        if scored.any():
            q[scored] = self._running_q(best.features[scored], decoy[scored])
        ok = scored & ~decoy & (q <= IDENTIFIED_AT)
        n_ok = int(np.count_nonzero(ok))
        identified, unidentified = ResultStatus.IDENTIFIED.value, ResultStatus.UNIDENTIFIED.value
        self.by_status[identified] += n_ok
        self.by_status[unidentified] += len(pep) - n_ok
        hits = pep[scored]
        names, proteins = iter(self.index.proformas(hits)), iter(self.index.accessions(hits))
        # plain lists, zipped: indexing numpy scalars one by one costs more than the conversion
        cols = zip(
            batch.run, batch.scan.tolist(), batch.precursor_mz.tolist(), batch.reason, pep.tolist(),
            best.charge.tolist(), best.calc_mz.tolist(), best.ppm_error.tolist(), raw.tolist(), q.tolist(),
            decoy.tolist(), best.matched_peaks.tolist(), ok.tolist(), strict=True,
        )  # fmt: skip
        return [
            {"run": run, "scan": scan, "status": unidentified, "reason": reason, "precursor_mz": prec}
            if p < 0 else {
                "run": run, "scan": scan, "status": identified if good else unidentified,
                "peptide": next(names), "proteins": next(proteins), "charge": z, "precursor_mz": prec,
                "calc_mz": calc, "ppm_error": ppm, "score": score, "q_value": qv, "is_decoy": d, "matched_peaks": k,
            }
            for run, scan, prec, reason, p, z, calc, ppm, score, qv, d, k, good in cols
        ]  # fmt: skip

    def add_unscored(
        self, status: ResultStatus, scans: Sequence[int], precursor_mz: Sequence[float], reasons: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Results for spectra answered without scoring (``shed`` or ``invalid``)."""
        self.table.add(unscored_batch(self.name, scans, precursor_mz, reasons, n_features=len(self.features)))
        self.by_status[status.value] += len(scans)
        return [
            {"run": self.name, "scan": int(s), "status": status.value, "reason": r, "precursor_mz": float(m)}
            for s, m, r in zip(scans, precursor_mz, reasons, strict=True)
        ]

    def finish(self) -> tuple[RunTable, RunSummary]:
        """Final discriminant and q-values (as offline); the table and the run's summary."""
        self.table.finalize()
        return self.table, run_summary(self.name, self.table, self.by_status)


def run_summary(name: str, table: RunTable, by_status: dict[str, int]) -> RunSummary:
    """The summary of a run whose ``table`` is finalized; ``by_status`` counts its published results."""
    psms, peptides = table.counts_at(0.01)
    assert table.peptide is not None
    return RunSummary(
        run=name, spectra=sum(by_status.values()), scored=int((table.peptide >= 0).sum()),
        identified_running=by_status[ResultStatus.IDENTIFIED.value], psms_at_1pct=psms,
        peptides_at_1pct=peptides, by_status=dict(by_status),
    )  # fmt: skip
