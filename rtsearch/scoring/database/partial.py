"""A batch's queries scored, before each spectrum's best is chosen: what a partition worker of a cluster returns.

`Engine.score` is `Engine.score_queries` (candidates and their statistics, per (spectrum, charge) query) followed
by `Engine.best_of` (each spectrum's best over its queries, and its features). A cluster that cuts the target by
precursor mass (`rtsearch.cluster`) scores each query on the worker holding its mass and chooses the best at the
front door, over the queries of every worker a spectrum went to (`merge`): a spectrum whose charges fall in two
workers' pieces gets the answer one engine would give, because the best is chosen over the same queries with the
same candidates (a worker holds every peptide of its queries' windows; peptide numbers are the whole target's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from rtsearch.scoring.database.candidates import Queries
from rtsearch.scoring.database.matching import MatchStats


@dataclass
class QueryScores:
    """Per query (Q rows) of a batch of S spectra: the query, its place among its spectrum's queries, its
    ``k`` candidates (whole-target peptide numbers, -1 none), their preliminary counts and statistics; per
    spectrum: the chance a random fragment matches (`Engine.match_probability`) and the reason it was not
    scored ("" when it was)."""

    queries: Queries
    order: np.ndarray  # int64 [Q]: the query's place among its spectrum's queries (charges in the spectrum's order)
    cand: np.ndarray  # int64 [Q, k] (CuPy where `Engine.score_queries` was asked to keep them on the device)
    prelim: np.ndarray  # int32 [Q, k]
    stats: MatchStats  # each [Q, k]
    match_probability: np.ndarray  # float64 [S]
    reason: list[str]  # [S]
    stages: dict[str, float] = field(default_factory=dict)


def merge(parts: Sequence[tuple[np.ndarray, QueryScores]], n_spectra: int) -> QueryScores:
    """One `QueryScores` of a batch of ``n_spectra`` from ``parts``: each the rows of the batch a worker scored (its
    sub-batch's spectrum ``i`` is the batch's ``rows[i]``) and what it returned. Queries are put back in the order
    one engine makes them (by spectrum, then charge); a spectrum's fields come from any part holding it."""
    spectrum = np.concatenate([rows[p.queries.spectrum] for rows, p in parts])
    order = np.concatenate([p.order for _, p in parts])
    by = np.lexsort((order, spectrum))
    mp = np.ones(n_spectra)
    reason = [""] * n_spectra
    for rows, p in parts:
        mp[rows] = p.match_probability
        for i, r in zip(rows.tolist(), p.reason, strict=True):
            reason[i] = r
    q = [p.queries for _, p in parts]
    queries = Queries(spectrum[by], *(np.concatenate([getattr(x, f) for x in q])[by] for f in ("charge", "mass", "lo",
                                                                                              "hi")))  # fmt: skip
    k = max((p.cand.shape[1] for _, p in parts), default=0)
    cand = np.concatenate([p.cand for _, p in parts]).reshape(-1, k)[by]
    prelim = np.concatenate([p.prelim for _, p in parts]).reshape(-1, k)[by]
    stats = MatchStats(*(np.concatenate([np.asarray(getattr(p.stats, f.name)) for _, p in parts]).reshape(-1, k)[by]
                         for f in fields(MatchStats)))  # fmt: skip
    return QueryScores(queries, order[by], cand, prelim, stats, mp, reason)
