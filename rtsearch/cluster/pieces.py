"""Partition mode's plan: which worker scores which of a batch's spectra, and the batch's answer from theirs.

A spectrum is one query per charge (`rtsearch.scoring.database.candidates`); it belongs to the piece holding its
neutral mass at its first charge (`rtsearch.cluster.partition.spectrum_masses`). Each worker holds the slice of the
target that queries of mass in ``serves[k]`` can reach (their precursor windows), so a spectrum whose every query
lies in its piece's ``serves`` goes there whole and comes back answered, best chosen and named by the worker —
Li et al.'s spectra split by precursor mass, each GPU scoring its own — and the door only puts the answers back in
order. A spectrum with a query beyond its piece's worker's slice (a target too large for one device, a charge of
another piece) is split: each of its queries goes to the owner of its mass, the workers send back the queries
scored, and the door chooses the best over them (`rtsearch.scoring.database.partial.merge`), as one engine would::

    spectrum 812.4 m/z, charges 2 and 3:  query 1,622.8 Da ─▶ worker 1 (serves 1,450–1,910 Da)
                                          query 2,434.2 Da ─▶ worker 2 (serves 1,910–∞ Da)
    door: best over both queries' candidates, features as one engine's

Each worker holds the piece it was cut with, widened to what its memory allows (`serving_ranges`: the whole mass
range when the target fits, and then no spectrum is split); `LiveCuts` moves the cuts within those ranges as the
spectra come, each spectrum weighed by what such spectra cost their workers (`rtsearch.cluster.cost`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.cluster.cost import SpectrumCost
from rtsearch.cluster.partition import LiveCuts, owners, spectrum_masses
from rtsearch.matches import ScoredBatch, concat_batches
from rtsearch.scoring.database.partial import QueryScores, merge
from rtsearch.search.live import named
from rtsearch.search.target import Reopen

log = logging.getLogger(__name__)

Own = tuple[float, float]  # a piece's precursor masses, [lo, hi) Da


@dataclass
class Pieces:
    """``target`` (a `rtsearch.search.database.DatabaseTarget` of the whole index, on the host) routes and
    finishes; ``cuts`` split the mass range into ``len(reopens)`` pieces; piece k's workers open ``reopens[k]`` (its
    slice) and can score queries of mass in ``serves[k]``."""

    target: Any
    cuts: LiveCuts
    serves: list[Own]
    reopens: list[Reopen]
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _told: bool = False  # the cuts held away from the spectra's by memory, said once
    cost: SpectrumCost = field(default_factory=SpectrumCost)  # a spectrum's work, as its worker's time says

    def __post_init__(self) -> None:
        self.cuts.hold(self.serves)
        self._lo, self._hi = (np.array(x, np.float64) for x in zip(*self.serves, strict=True))

    def route(self, batch: SpectraBatch) -> list[Part]:
        """The batch's parts: per piece, the spectra it answers whole, and the queries it scores of spectra split."""
        n = len(batch)
        spectrum, mass, candidates = self.target.query_masses(batch)
        first = spectrum_masses(batch.precursor_mz, batch.charges)
        per = np.bincount(spectrum, weights=candidates, minlength=n)  # the candidates each spectrum meets
        with self._lock:
            cut = self.cuts.add(first, self.cost.work(per))
            cuts, wanted = self.cuts.cuts, self.cuts.wanted
        if cut and not self._told and np.any(np.abs(wanted - cuts) > 1.0):
            self._told = True  # once: the spectra's masses crowd where one worker's slice must serve them
            log.warning("cluster: the spectra would cut the pieces at %s Da, the workers' memory holds the cuts at %s: "
                        "the pieces' work is uneven (more memory each, or more workers)",
                        np.round(wanted).tolist(), np.round(cuts).tolist())  # fmt: skip
        home = owners(first, cuts)
        at = home[spectrum]  # each query's spectrum's piece
        beyond = (mass < self._lo[at]) | (mass >= self._hi[at])
        split = np.zeros(n, bool)
        split[spectrum[beyond]] = True
        out = []
        for p in np.unique(home[~split]).tolist():
            rows = np.flatnonzero(~split & (home == p))
            m = np.concatenate([mass[~split[spectrum] & (at == p)], first[rows]])
            m = m[np.isfinite(m)]
            span = (float(m.min()), float(np.nextafter(m.max(), np.inf))) if m.size else (-np.inf, np.inf)
            out.append(Part(p, rows, span, True, float(per[rows].sum())))
        mine = split[spectrum]
        piece = owners(mass[mine], cuts)
        bounds = np.concatenate([[-np.inf], cuts, [np.inf]])
        for p in np.unique(piece).tolist():
            rows = np.unique(spectrum[mine][piece == p])
            out.append(Part(p, rows, (float(bounds[p]), float(bounds[p + 1])), False))
        return out

    def finish(self, batch: SpectraBatch, parts: list[tuple[Part, ScoredBatch | QueryScores]]) -> ScoredBatch:
        """The batch's answers in its order: the spectra answered whole as their workers answered them, the split
        ones' best over the queries the workers scored, chosen and named here."""
        done = [(part.rows, a) for part, a in parts if isinstance(a, ScoredBatch)]
        with self._lock:  # what each whole part cost its worker teaches the cuts (`SpectrumCost`)
            for part, a in parts:
                if part.whole and isinstance(a, ScoredBatch) and "scoring" in a.stages:
                    self.cost.observe(len(part.rows), part.candidates, a.stages.get("share", a.stages["scoring"]))
        queries = [(part.rows, a) for part, a in parts if isinstance(a, QueryScores)]
        if queries:
            split = np.unique(np.concatenate([rows for rows, _ in queries]))
            sub = batch.take(split)
            merged = merge([(np.searchsorted(split, rows), a) for rows, a in queries], len(split))
            done.append((split, named(self.target, self.target.best_of(sub, merged))))
        if len(done) == 1:
            return done[0][1]
        out = concat_batches([answer for _, answer in done]).take(np.argsort(np.concatenate([r for r, _ in done])))
        out.native_id = list(batch.native_id)
        for _, answer in done:
            for stage, seconds in answer.stages.items():
                out.stages[stage] = max(out.stages.get(stage, 0.0), seconds)
        return out

    def covers(self, piece: int, own: Own) -> bool:
        """Whether worker ``piece`` holds what queries of mass in ``own`` need (it can stand in for the owner)."""
        lo, hi = self.serves[piece]
        return lo <= own[0] and own[1] <= hi


@dataclass(frozen=True)
class Part:
    """What one worker is asked of a batch: its ``rows``; ``whole``: those spectra answered (`ScoredBatch`), else
    their queries of mass in ``own`` scored (`QueryScores`); ``own`` spans the masses it scores (failover: a worker
    whose slice covers it can stand in)."""

    piece: int
    rows: np.ndarray
    own: Own
    whole: bool
    candidates: float = 0.0  # whole: the candidates its spectra meet (`SpectrumCost`)
