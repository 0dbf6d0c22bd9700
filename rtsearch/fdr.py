"""Target-decoy false discovery rates.

The target-decoy strategy: Elias & Gygi 2007, Nat. Methods 4:207 (decoys in
the same search, competing with targets for the top hit). q-values as the
minimum FDR at which a PSM is accepted: Storey & Tibshirani 2003, PNAS
100:9440, applied to PSMs in Käll et al. 2008, J. Proteome Res. 7:29.
Peptide-level: the best PSM of each peptide, then the same estimate
(Granholm et al. 2011 discuss why this level matters).

Here FDR at a threshold is ``decoys / targets`` above it (no +1), and q-values
are made monotone from the bottom up. Equal scores are ranked decoys first,
so ties never flatter the estimate.
"""

from __future__ import annotations

import numpy as np


def q_values(score: np.ndarray, is_decoy: np.ndarray) -> np.ndarray:
    """q-value of every PSM (higher score is better; NaN scores get q = 1)."""
    score = np.asarray(score, dtype=np.float64)
    decoy = np.asarray(is_decoy, dtype=bool)
    n = score.shape[0]
    q = np.ones(n, dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(score))
    if ok.size == 0:
        return q
    order = ok[np.lexsort((~decoy[ok], -score[ok]))]
    d = np.cumsum(decoy[order])
    t = np.cumsum(~decoy[order])
    fdr = d / np.maximum(t, 1)
    # equal scores share the FDR at the end of their group
    s = score[order]
    last_of_group = np.r_[s[1:] != s[:-1], True]
    group_end = np.flatnonzero(last_of_group)
    gid = np.cumsum(np.r_[0, last_of_group[:-1].astype(np.int64)])
    fdr = fdr[group_end][gid]
    q[order] = np.minimum.accumulate(fdr[::-1])[::-1]
    return np.minimum(q, 1.0)


def peptide_q_values(score: np.ndarray, is_decoy: np.ndarray, peptide: np.ndarray) -> np.ndarray:
    """q-value of each PSM's peptide: the q of the peptide's best PSM among peptides."""
    score = np.asarray(score, dtype=np.float64)
    out = np.ones(score.shape[0])
    ok = np.flatnonzero(np.isfinite(score))
    if ok.size == 0:
        return out
    keys, inv = np.unique(np.asarray(peptide)[ok], return_inverse=True)
    best = np.full(keys.shape[0], -np.inf)
    np.maximum.at(best, inv, score[ok])
    decoy_of = np.zeros(keys.shape[0], dtype=bool)
    decoy_of[inv] = np.asarray(is_decoy, dtype=bool)[ok]
    out[ok] = q_values(best, decoy_of)[inv]
    return out


def count_at(q: np.ndarray, is_decoy: np.ndarray, level: float = 0.01) -> int:
    """Targets with q-value at or below ``level``."""
    return int(np.sum((np.asarray(q) <= level) & ~np.asarray(is_decoy, dtype=bool)))


class RunningFdr:
    """q-values while a run goes on: every PSM so far competes, as in `q_values`.

    Scores are kept sorted (ascending; among equal scores decoys sit above
    targets, i.e. are ranked first), so adding a batch is a merge plus one
    linear pass, not a sort of the whole run. A PSM's running q-value is
    final for its message only: later PSMs move the estimate, and the
    end-of-run `q_values` on the run's discriminant supersede it.
    """

    def __init__(self) -> None:
        self._score = np.zeros(0, dtype=np.float64)
        self._decoy = np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return int(self._score.shape[0])

    def add(self, score: np.ndarray, is_decoy: np.ndarray) -> np.ndarray:
        """Add PSMs and return their running q-values (NaN scores are not added and get 1)."""
        score = np.asarray(score, dtype=np.float64)
        decoy = np.asarray(is_decoy, dtype=bool)
        out = np.ones(score.shape[0])
        ok = np.isfinite(score)
        if not ok.any():
            return out
        s, d = score[ok], decoy[ok]
        order = np.lexsort((d, s))
        s, d = s[order], d[order]
        # targets before, decoys after equal old scores: decoys rank first among ties
        pos = np.where(d, np.searchsorted(self._score, s, "right"), np.searchsorted(self._score, s, "left"))
        self._score = np.insert(self._score, pos, s)
        self._decoy = np.insert(self._decoy, pos, d)
        q_sorted = self._q_sorted()
        # equal scores share one q: read it at the first element of the group
        q_new = q_sorted[np.searchsorted(self._score, s, "left")]
        res = np.empty_like(q_new)
        res[order] = q_new
        out[ok] = res
        return out

    def _q_sorted(self) -> np.ndarray:
        s = self._score[::-1]
        d = self._decoy[::-1]
        fdr = np.cumsum(d) / np.maximum(np.cumsum(~d), 1)
        last_of_group = np.r_[s[1:] != s[:-1], True]
        group_end = np.flatnonzero(last_of_group)
        gid = np.cumsum(np.r_[0, last_of_group[:-1].astype(np.int64)])
        fdr = fdr[group_end][gid]
        q = np.minimum(np.minimum.accumulate(fdr[::-1])[::-1], 1.0)
        return q[::-1]
