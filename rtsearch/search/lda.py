"""A linear discriminant over PSM features, fitted per run on targets vs decoys.

Fisher's linear discriminant on standardized features (ridge-regularized
within-class scatter). As in Percolator (Käll et al. 2007, Nat. Methods
4:923) the positive class is refined iteratively: start from the best single
feature, take the targets accepted at 1 % FDR as positives and all decoys as
negatives, fit, rescore, repeat. With too few accepted targets every target
is a positive, as in Sage's LDA.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from rtsearch.search.fdr import count_at, q_ranked, q_values

MIN_POSITIVES = 20
NOT_FITTED = frozenset({"signed_ppm_error", "matched_ions"})  # descriptive, or a sum of fitted ones
RIDGE = 1e-3
# PSMs from which `rank_features` ranks on threads: 25 features on two cores, one thread / threads, best of 7
# (the since-deleted probe best_feature_probe.py, 2026-11-28): 500 PSMs (a live refit's size) 2.9 / 5.4 ms,
# 5,000 13.7 / 14.0 ms, 20,000 87.4 / 58.5 ms
THREADED_MIN = 10_000
Ranked = list[tuple[int, int] | None]  # per feature, `rank_features`' counts where known


@dataclass
class Discriminant:
    """``score = ((x - mean) / std) @ weights``."""

    names: tuple[str, ...]
    mean: np.ndarray
    std: np.ndarray
    weights: np.ndarray
    ranked: list[tuple[int, int]] | None = field(default=None, repr=False, compare=False)  # `rank_features`

    def score(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.std) @ self.weights


@dataclass(frozen=True)
class Scatter:
    """One class's rows of standardized features: how many, their mean and scatter (covariance × rows)."""

    n: int
    mean: np.ndarray
    scatter: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray) -> Scatter:
        return cls(len(rows), rows.mean(axis=0), np.cov(rows, rowvar=False, bias=True) * len(rows))


def fisher(x: np.ndarray, positive: np.ndarray, negative: np.ndarray | Scatter, ridge: float = RIDGE) -> np.ndarray:
    """Fisher direction ``(Sw + ridge I)^-1 (mu_pos - mu_neg)`` for standardized ``x``; ``negative``: a mask of
    ``x``'s rows, or their `Scatter` (the same for every iteration of a fit: computed once)."""
    a = Scatter.of(x[positive])
    b = negative if isinstance(negative, Scatter) else Scatter.of(x[negative])
    sw = np.atleast_2d(a.scatter + b.scatter) / max(a.n + b.n, 1)
    sw += ridge * np.eye(sw.shape[0])
    sw[np.diag_indices_from(sw)] = np.where(np.diag(sw) > ridge, np.diag(sw), 1.0)
    w = np.linalg.solve(sw, a.mean - b.mean)
    norm = np.linalg.norm(w)
    return w / norm if norm > 0 else w


def _q(score: np.ndarray, decoy: np.ndarray) -> np.ndarray:
    """The q-values a fit picks its positives by: decoys / targets (`rtsearch.search.fdr`'s docstring says why)."""
    return q_values(score, decoy, plus_one=False)


def _accepted(col: np.ndarray, decoy: np.ndarray) -> tuple[int, int]:
    """Targets accepted at 1 % FDR ranking by ``col``, and by ``-col``."""
    if not np.any(col != col[0]):  # constant (a feature not fitted is all zeros): it ranks nothing
        return -1, -1
    rows = np.flatnonzero(np.isfinite(col))
    order = rows[np.argsort(-col[rows])]  # one ranking serves both signs, reversed for -1
    up, down = order, order[::-1]
    return (count_at(q_ranked(col[up], decoy[up], plus_one=False), decoy[up]),
            count_at(q_ranked(-col[down], decoy[down], plus_one=False), decoy[down]))  # fmt: skip


def rank_features(z: np.ndarray, decoy: np.ndarray, known: Ranked | None = None) -> list[tuple[int, int]]:
    """Per feature (column of ``z``), the targets accepted at 1 % FDR ranking by it and by its negative;
    ``known[j]``, where not ``None``, is taken as feature j's (an earlier fit's, the column unchanged since).

    From `THREADED_MIN` PSMs the features are ranked on threads (NumPy's sort releases the GIL): 0.216–0.226 →
    0.135–0.146 s for 50,000 PSMs × 25 features on the 2-core development machine (the since-deleted probe
    best_feature_probe.py, docs/history/RESULTS.md 2026-11-28); below it the threads cost more than they save."""
    todo = [j for j in range(z.shape[1]) if known is None or known[j] is None]
    rank = lambda j: _accepted(z[:, j], decoy)  # noqa: E731
    if len(z) < THREADED_MIN or len(todo) < 2:
        done = [rank(j) for j in todo]
    else:
        with ThreadPoolExecutor(min(len(todo), os.cpu_count() or 1, 8)) as pool:
            done = list(pool.map(rank, todo))
    counts = dict(zip(todo, done, strict=True))
    return [counts[j] if j in counts else known[j] for j in range(z.shape[1])]  # type: ignore[index,misc]


def best_feature(z: np.ndarray, decoy: np.ndarray, *, counts: list[tuple[int, int]] | None = None) -> np.ndarray:
    """Unit direction of the single feature (either sign) accepting the most targets at 1 % FDR (the first
    such, features in order, + before -); ``counts``: `rank_features` of ``z``, when made already."""
    best, best_n = np.zeros(z.shape[1]), -1
    if len(z) == 0:
        return best
    for j, pair in enumerate(rank_features(z, decoy) if counts is None else counts):
        for sign, n in zip((1.0, -1.0), pair, strict=True):
            if n > best_n:
                best_n = n
                best = np.zeros(z.shape[1])
                best[j] = sign
    return best


def fit(
    x: np.ndarray, is_decoy: np.ndarray, names: tuple[str, ...], *, start: str, iterations: int = 10,
    ridge: float = RIDGE, known: Ranked | None = None,
) -> Discriminant:
    """Fit the discriminant on one run's top PSMs (``x``: [n, features]).

    The first positives are the targets accepted by the best single feature
    (Percolator's start); ``start`` names the feature used when it ties;
    ``ridge`` shrinks the within-class scatter (standardized features).
    ``known``: an earlier fit's ``ranked`` on the same rows, ``None`` for the
    features changed since (`rank_features`: the same choice, fewer sorts).
    """
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)
    # features not fitted: descriptive columns kept for output only
    use = np.array([n not in NOT_FITTED for n in names])
    mean = np.where(use, mean, 0.0)
    std = np.where(use, std, np.inf)
    z = np.where(use, (x - mean) / np.where(use, std, 1.0), 0.0)
    weights = np.zeros(x.shape[1])
    weights[names.index(start)] = 1.0
    decoy = np.asarray(is_decoy, dtype=bool)
    if decoy.sum() < 2 or (~decoy).sum() < 2:
        return Discriminant(names, mean, std, weights)
    ranked = rank_features(z, decoy, known)
    first = best_feature(z, decoy, counts=ranked)
    if count_at(_q(z @ first, decoy), decoy) > count_at(_q(z @ weights, decoy), decoy):
        weights = first
    used: np.ndarray | None = None  # the positives the current weights were fitted on
    negatives = Scatter.of(z[decoy])  # the decoys stay the negatives: their scatter once, not every iteration
    for _ in range(iterations):
        s = z @ weights
        q = _q(s, decoy)
        pos = (~decoy) & (q <= 0.01)
        if count_at(q, decoy) < MIN_POSITIVES:
            pos = ~decoy
        if used is not None and np.array_equal(pos, used):
            break  # the same positives would give the same weights again: a fixed point
        used = pos
        w = fisher(z, pos, negatives, ridge)
        if not np.all(np.isfinite(w)):
            break
        weights = w
    return Discriminant(names, mean, std, weights, ranked)
