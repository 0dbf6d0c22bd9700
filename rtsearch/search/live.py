"""A run being acquired: per-spectrum results with running q-values, then the end-of-run table.

`LiveRun` is core logic with no I/O: the daemon hands it each scored batch
and gets back one result (a plain dict in the wire protocol's result fields)
per spectrum; spectra that were shed or invalid are recorded with their
reason. At the end `LiveRun.finish` fits the run's discriminant and final
q-values exactly as the offline search does (`rtsearch.search.table.PsmTable`).

Running q-values rank by the primary score until ``REFIT_FIRST`` spectra of the
run are scored; then by the run's own discriminant, fitted on everything so
far (on the target's ``live_features``: for a database, |ppm| instead of the
run's z-score and no retention time; with the target's ``ridge``, as its run-end fit) and refitted whenever the
count doubles up to ``REFIT_LAST``, with every PSM so far re-ranked. A run's PSMs answered before it holds
``LIVE_FROM`` scored ones get q = 1 (no estimate yet): with the estimate decoys / targets of that time, the
targets ranked before a run's first decoys got q = 0, and on the dev runs with a 1:1 entrapment those early
answers were most of the live false matches (docs/history/RESULTS.md, "Running q-values that entrapment
confirms"); (decoys + 1) / targets (`rtsearch.search.fdr.RULE`) now bounds them too, and the rule stays for a
looser ``identified_at``. A target is answered identified at a running q at or below ``identified_at``. With
``refits="inline"`` the refit runs inside the `add_scored` call that crosses the count; with
``refits="deferred"`` (the daemon) `LiveRun.refit_due` hands it out to run elsewhere, off the scoring path,
and `LiveRun.install` brings the result back. ``q_refresh`` is
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

from rtsearch.matches import STATUSES, Names, Results, ScoredBatch, unscored_batch
from rtsearch.search.fdr import RULE, RunningFdr
from rtsearch.search.lda import RIDGE, Discriminant, fit
from rtsearch.search.table import PsmTable
from rtsearch.search.target import SearchTarget
from rtsearch.types import ResultStatus

REFIT_FIRST = 100  # scored spectra before the first live discriminant; refitted at every doubling after
LIVE_FROM = 50  # scored spectra a run holds before its running q-values are given (q = 1 before: no estimate)
REFIT_LAST = 8000  # no refits beyond this: the fit stabilizes, and its cost grows with the run
Refits = Literal["inline", "deferred"]
_IDENTIFIED, _UNIDENTIFIED = STATUSES.index("identified"), STATUSES.index("unidentified")


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
    psms_at_5pct: int = 0  # a run too small for a list at 1 % (under 100 targets: `rtsearch.search.fdr.RULE`)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run, "spectra": self.spectra, "scored": self.scored,
            "identified_running": self.identified_running, "psms_at_1pct": self.psms_at_1pct,
            "peptides_at_1pct": self.peptides_at_1pct, "psms_at_5pct": self.psms_at_5pct, "q_value_rule": RULE,
            "by_status": dict(self.by_status),
        }  # fmt: skip


class LiveRun:
    """Results of one run as its spectra are scored against ``target``; see the module docstring."""

    def __init__(
        self, name: str, target: SearchTarget, *, refits: Refits = "inline", q_refresh: float = 0.0,
        sink: Callable[[ScoredBatch, np.ndarray], None] | None = None, identified_at: float = 0.01,
    ) -> None:  # fmt: skip
        """``sink``, when given, gets every batch the run's table gets and the status codes of its answers
        (`rtsearch.matches.STATUSES`), before they are returned (the daemon's journal); ``identified_at``: the
        running q-value at or below which a target match is answered identified (``[serve] identified_at``)."""
        self.name = name
        self.identified_at = identified_at
        self.sink = sink
        self.target = target
        self.primary = target.primary
        self.refits = refits
        self.q_refresh = q_refresh
        self.features = target.features
        self.ridge = getattr(target, "ridge", RIDGE)  # the target's run-end discriminant's, where it sets one
        self.table = PsmTable(target)
        self.fdr = RunningFdr(refresh=q_refresh)
        self.by_status: dict[str, int] = dict.fromkeys((s.value for s in ResultStatus), 0)
        self._col = self.features.index(self.primary)
        self._x: list[np.ndarray] = []  # live features of every scored PSM so far
        self._d: list[np.ndarray] = []
        self._n_scored = 0
        self._next_fit = REFIT_FIRST
        self._fitting = False
        self.discriminant: Discriminant | None = None

    def _running_q(self, feats: np.ndarray, decoy: np.ndarray) -> np.ndarray:
        """Running q-values of new scored PSMs (see the module docstring)."""
        x = self.target.live_features(feats)
        self._n_scored += len(x)
        if self._next_fit <= REFIT_LAST or self._fitting:  # kept only while a refit will read them
            self._x.append(x)
            self._d.append(decoy)
        if self.refits == "inline" and (refit := self.refit_due()) is not None:
            q = self.install(refit())[-len(x) :]  # every PSM re-ranked, this batch's read off
        else:
            q = self.fdr.add(self.discriminant.score(x) if self.discriminant is not None else x[:, self._col], decoy)
        return q if self._n_scored >= LIVE_FROM else np.ones_like(q)

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
        return functools.partial(fit, all_x, all_d, self.features, start=self.primary, ridge=self.ridge)

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

    def add_scored(self, batch: ScoredBatch) -> Results:
        """The answers to ``batch`` (all of this run), running q-values included."""
        self.table.add(batch)
        best = batch.best
        match = best.match
        scored = match >= 0
        raw = np.where(scored, best.features[:, self._col], np.nan)
        decoy = np.zeros(len(match), dtype=bool)
        decoy[scored] = self.target.is_decoy(match[scored])
        q = np.ones(len(match))
        if scored.any():
            q[scored] = self._running_q(best.features[scored], decoy[scored])
        ok = scored & ~decoy & (q <= self.identified_at)
        n_ok = int(np.count_nonzero(ok))
        self.by_status[ResultStatus.IDENTIFIED.value] += n_ok
        self.by_status[ResultStatus.UNIDENTIFIED.value] += len(match) - n_ok
        hits, t = match[scored], self.target
        if batch.names is not None:  # named where it was scored
            rows = np.flatnonzero(scored).tolist()
            peptides, proteins = [batch.names.peptides[i] for i in rows], [batch.names.proteins[i] for i in rows]
        else:
            peptides, proteins = t.peptides(hits), t.proteins(hits)
        out = Results(
            self.name, batch.scan, np.where(ok, _IDENTIFIED, _UNIDENTIFIED).astype(np.int8), batch.reason,
            batch.precursor_mz, scored, best.charge, best.calc_mz, best.ppm_error, raw, q, decoy, best.matched_peaks,
            peptides, proteins, t.extra_fields(hits, best.features[scored]), batch.rt,
        )  # fmt: skip
        if self.sink is not None:
            self.sink(batch, out.status)
        return out

    def add_unscored(
        self, status: ResultStatus, scans: Sequence[int], precursor_mz: Sequence[float], reasons: Sequence[str],
        ids: Sequence[str] = (),
    ) -> Results:  # fmt: skip
        """Answers to spectra answered without scoring (``shed`` or ``invalid``); ``ids``: their native ids, if any."""
        self.book_unscored(status, scans, precursor_mz, reasons, ids)
        return Results.unscored(self.name, scans, precursor_mz, reasons, status.value)

    def book_unscored(
        self, status: ResultStatus, scans: Sequence[int], precursor_mz: Sequence[float], reasons: Sequence[str],
        ids: Sequence[str] = (),
    ) -> None:  # fmt: skip
        """Record spectra answered without scoring elsewhere (the daemon's door answered them ``shed``)."""
        batch = unscored_batch(self.name, scans, precursor_mz, reasons, n_features=len(self.features), ids=ids)
        self.table.add(batch)
        self.by_status[status.value] += len(scans)
        if self.sink is not None:
            self.sink(batch, np.full(len(scans), STATUSES.index(status.value), np.int8))

    def finish(self) -> tuple[PsmTable, RunSummary]:
        """Final discriminant and q-values (as offline); the table and the run's summary."""
        self.table.finalize()
        return self.table, run_summary(self.name, self.table, self.by_status)


def named(target: SearchTarget, batch: ScoredBatch) -> ScoredBatch:
    """``batch`` with its best matches' names (`Names`), as `LiveRun.add_scored` would work them out (kept when
    the target named them itself while scoring, as top-down search does with its shifts)."""
    if batch.names is not None:
        return batch
    match = batch.best.match
    scored = match >= 0
    if scored.all():  # the usual batch: no row to fill in
        batch.names = Names(target.peptides(match), target.proteins(match))
        return batch
    rows, flags = np.flatnonzero(scored), scored.tolist()
    peps, prots = iter(target.peptides(match[rows])), iter(target.proteins(match[rows]))
    # one comprehension each (a loop of indexed stores, and `list[str]()` a row, cost 5 ms a batch of 4,096)
    batch.names = Names([next(peps) if s else "" for s in flags], [next(prots) if s else [] for s in flags])
    return batch


def run_summary(name: str, table: PsmTable, by_status: dict[str, int]) -> RunSummary:
    """The summary of a run whose ``table`` is finalized; ``by_status`` counts its published results."""
    psms, peptides = table.counts_at(0.01)
    assert table.match is not None
    return RunSummary(
        run=name, spectra=sum(by_status.values()), scored=int((table.match >= 0).sum()),
        identified_running=by_status[ResultStatus.IDENTIFIED.value], psms_at_1pct=psms,
        peptides_at_1pct=peptides, by_status=dict(by_status), psms_at_5pct=table.counts_at(0.05)[0],
    )  # fmt: skip
