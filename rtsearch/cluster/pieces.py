"""Partition mode's plan: which worker scores which of a batch's queries, and the batch's answer from theirs.

A spectrum is one query per charge (`rtsearch.scoring.database.candidates`); a query belongs to the piece holding
its neutral mass. The door sends each worker the spectra with a query in its piece and the piece's mass range;
the worker scores those queries only, against the slice of the target it holds (`serves`: the peptides those
queries' precursor windows can reach) and sends back the queries scored, not a best match; the door chooses each
spectrum's best over all its queries (`rtsearch.scoring.database.partial.merge`). A spectrum whose charges fall in
two pieces — or whose window straddles a cut — is answered as one engine would answer it::

    spectrum 812.4 m/z, charges 2 and 3:  query 1,622.8 Da ─▶ worker 1 (piece 1,450–1,910 Da)
                                          query 2,434.2 Da ─▶ worker 2 (piece 1,910–∞ Da)
    door: best over both queries' candidates, features as one engine's

Each worker holds the piece it was cut with, widened to what its memory allows (`serving_ranges`); `LiveCuts`
moves the cuts within those ranges as the spectra come.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.cluster.partition import LiveCuts, owners, spectrum_masses
from rtsearch.matches import ScoredBatch
from rtsearch.scoring.database.partial import QueryScores, merge
from rtsearch.search.live import named
from rtsearch.search.target import Reopen

Own = tuple[float, float]  # a piece's precursor masses, [lo, hi) Da


@dataclass
class Pieces:
    """``target`` (a `rtsearch.search.database.DatabaseTarget` of the whole index, on the host) routes and
    finishes; ``cuts`` split the mass range into ``len(reopens)`` pieces; worker k opens ``reopens[k]`` (its
    slice) and can score queries of mass in ``serves[k]``."""

    target: Any
    cuts: LiveCuts
    serves: list[Own]
    reopens: list[Reopen]
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.cuts.hold(self.serves)

    def route(self, batch: SpectraBatch) -> list[tuple[int, np.ndarray, Own]]:
        """(piece, rows of ``batch``, the piece's mass range) of each piece with a query of the batch."""
        spectrum, mass = self.target.query_masses(batch)
        first = spectrum_masses(batch.precursor_mz, batch.charges)
        with self._lock:
            self.cuts.add(first)
            cuts = self.cuts.cuts
        piece = owners(mass, cuts)
        alone = np.setdiff1d(np.arange(len(batch)), spectrum)  # no query at all: its first charge's piece answers
        spectrum = np.concatenate([spectrum, alone])
        piece = np.concatenate([piece, owners(first[alone], cuts)])
        bounds = np.concatenate([[-np.inf], cuts, [np.inf]])
        out = []
        for p in np.unique(piece).tolist():
            rows = np.unique(spectrum[piece == p])
            out.append((p, rows, (float(bounds[p]), float(bounds[p + 1]))))
        return out

    def finish(self, batch: SpectraBatch, parts: list[tuple[np.ndarray, QueryScores]]) -> ScoredBatch:
        """The batch's answers: each spectrum's best over the queries the workers scored, named."""
        return named(self.target, self.target.best_of(batch, merge(parts, len(batch))))

    def covers(self, piece: int, own: Own) -> bool:
        """Whether worker ``piece`` holds what queries of mass in ``own`` need (it can stand in for the owner)."""
        lo, hi = self.serves[piece]
        return lo <= own[0] and own[1] <= hi
