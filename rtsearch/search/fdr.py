"""Target-decoy false discovery rates.

The target-decoy strategy: Elias & Gygi 2007, Nat. Methods 4:207 (decoys in
the same search, competing with targets for the top hit). q-values as the
minimum FDR at which a PSM is accepted: Storey & Tibshirani 2003, PNAS
100:9440, applied to PSMs in Käll et al. 2008, J. Proteome Res. 7:29.
Peptide-level: the best PSM of each peptide, then the same estimate
(Granholm et al. 2011 discuss why this level matters).

Posterior error probabilities (`peps`): the local FDR at a PSM's score, decoy over target
density, made monotone by isotonic regression as qvality does (Käll, Storey & Noble 2009,
Bioinformatics 25:964).

The score ranked is a run's discriminant (`rtsearch.search.lda`, fitted per run as Percolator does: Käll et
al. 2007, Nat. Methods 4:923), and a discriminant fitted on the PSMs it ranks can learn a small run's few
decoys away. What keeps it honest here is checked, not assumed: entrapment (Wen et al. 2025, Nat. Methods,
"Assessment of false discovery rate control in tandem mass spectrometry analysis using entrapment"; each
protein again, shuffled, as a target that cannot be in the sample; FDP ≈ 2 × entrapment / accepted) on the
four dev runs, `bench/entrapment.py` and `tests/e2e/test_entrapment.py`. k-fold fits (Granholm et al. 2012,
J. Proteome Res. 11:1204, as Percolator and mokapot do), RESET (Freestone et al. 2024, J. Proteome Res.) and
fits carried from other runs were measured there and lost identifications on runs of ~120-1,100 spectra
(docs/history/RESULTS.md); what holds the 1 % is a stronger shrinkage of the discriminant and one feature that a
random match rarely has, sibling evidence (`rtsearch.scoring.database.siblings`): 0 entrapment matches in 273
accepted, where the plain fit let 3 in 231. The daemon's running q-values rank the live features (no sibling
evidence yet, the same shrinkage) by a discriminant of the run so far, fitted from its 100th scored PSM on
(`rtsearch.search.live`), and give none (q = 1) before a run holds 50 scored PSMs: with fewer, decoys / targets
is 0 for the targets that come before the first decoys, and those were most of the live false matches (the dev
runs' live answers, `bench/entrapment.py`: 164 accepted / 16 entrapment before, 111-118 / 0-1 with these
rules); its results file gets the run-end fit.

Here FDR at a threshold is ``(decoys + 1) / targets`` at or above it (`RULE`), as mokapot, Sage and Percolator
report it: the +1 is what bounds the FDR of a finite list (Barber & Candès 2015, Ann. Statist. 43:2055, knockoff+;
He et al. 2015, "A theoretical foundation of the target-decoy search strategy", for its competition). Without it, a
run with no true match gives q = 0 to every target ranked above its first decoy — half of such runs report at least
one (the human F13 run against the E. coli index reported 7). The price: a list at 1 % holds at least 100 targets,
so a run with fewer confident matches reports none at 1 % and its matches are read at a looser level (the summaries
print 5 %).
A discriminant's training (`rtsearch.search.lda`, the calibration's confident targets) ranks by ``decoys /
targets`` (``plus_one=False``): that picks positives, it is not a reported estimate.

q-values are made monotone from the bottom up. Equal scores share the FDR counted at the end of their group
(decoys among them included), so ties never flatter the estimate.
"""

from __future__ import annotations

import numpy as np

RULE = "(decoys + 1) / targets"  # the reported q-values' estimate, as the results' provenance names it


def q_values(score: np.ndarray, is_decoy: np.ndarray, *, plus_one: bool = True) -> np.ndarray:
    """q-value of every PSM (higher score is better; NaN scores get q = 1); ``plus_one=False``: decoys / targets,
    for training only (the module docstring)."""
    score = np.asarray(score, dtype=np.float64)
    decoy = np.asarray(is_decoy, dtype=bool)
    n = score.shape[0]
    q = np.ones(n, dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(score))
    if ok.size == 0:
        return q
    order = ok[np.argsort(-score[ok])]  # any order within equal scores: `q_ranked`
    q[order] = q_ranked(score[order], decoy[order], plus_one=plus_one)
    return q


def q_ranked(score: np.ndarray, is_decoy: np.ndarray, *, plus_one: bool = True) -> np.ndarray:
    """q-values of PSMs already ranked best first (``score`` non-increasing, finite).

    Equal scores share the FDR at the end of their group, so the order within a group does not matter
    (a ranking can be reversed for the opposite sign of a score)."""
    d = np.cumsum(is_decoy)
    t = np.arange(1, d.shape[0] + 1) - d
    fdr = (d + plus_one) / np.maximum(t, 1)
    last_of_group = np.r_[score[1:] != score[:-1], True]
    group_end = np.flatnonzero(last_of_group)
    gid = np.cumsum(np.r_[0, last_of_group[:-1].astype(np.int64)])
    fdr = fdr[group_end][gid]
    return np.minimum(np.minimum.accumulate(fdr[::-1])[::-1], 1.0)


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


def confident(score: np.ndarray, decoy: np.ndarray, *, minimum: int = 10) -> np.ndarray:
    """Targets accepted at 1 % FDR, or the ``minimum`` best targets when fewer are (a calibration's training set)."""
    good = (q_values(score, decoy, plus_one=False) <= 0.01) & ~decoy
    if good.sum() < minimum:
        targets = np.flatnonzero(~decoy)
        good = np.zeros(score.shape[0], dtype=bool)
        good[targets[np.argsort(-score[targets], kind="stable")[:minimum]]] = True
    return good

class RunningFdr:
    """q-values while a run goes on: every PSM so far competes, as in `q_values` (the same `RULE`).

    Scores are kept sorted (ascending; among equal scores decoys sit above
    targets, i.e. are ranked first), so adding a batch is a merge plus one
    linear pass, not a sort of the whole run. A PSM's running q-value is
    final for its message only: later PSMs move the estimate, and the
    end-of-run `q_values` on the run's discriminant supersede it.

    ``refresh`` trades exactness for a bounded cost per PSM: with ``refresh=0``
    (the default) every batch gets exactly `q_values` over all PSMs so far; with
    ``refresh=0.01`` a batch adding fewer PSMs than 1 % of those already ranked is
    read off the last computed q curve (its score's tie group, else the next
    lower score's q or the PSM's own FDR, whichever is lower; both bound the exact
    q from above, up to the PSMs not yet merged) and merged at the next
    refresh, so one spectrum costs a binary search instead of a pass over the run.
    """

    def __init__(self, *, refresh: float = 0.0) -> None:
        if not 0.0 <= refresh < 1.0:
            raise ValueError("refresh must be in [0, 1)")
        self.refresh = refresh
        self._score = np.zeros(0, dtype=np.float64)
        self._decoy = np.zeros(0, dtype=bool)
        self._q: np.ndarray | None = None  # q of each element of _score, as last computed
        self._decoys_below: np.ndarray | None = None  # decoys among elements [0, i) of _score
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []  # added since, not yet merged
        self._n_pending = 0
        self._threshold: tuple[float, float, np.ndarray | None] = (-1.0, float("nan"), None)  # level, score, of _q

    def __len__(self) -> int:
        return int(self._score.shape[0]) + self._n_pending

    def add(self, score: np.ndarray, is_decoy: np.ndarray) -> np.ndarray:
        """Add PSMs and return their running q-values (NaN scores are not added and get 1)."""
        score = np.asarray(score, dtype=np.float64)
        decoy = np.asarray(is_decoy, dtype=bool)
        out = np.ones(score.shape[0])
        ok = np.isfinite(score)
        if not ok.any():
            return out
        s, d = score[ok], decoy[ok]
        if self._q is not None and self._n_pending + s.shape[0] <= self.refresh * self._score.shape[0]:
            self._pending.append((s, d))
            self._n_pending += s.shape[0]
            out[ok] = self._read_stale_one(float(s[0]), bool(d[0])) if s.shape[0] == 1 else self._read_stale(s, d)
            return out
        if self._pending:
            old_s, old_d = zip(*self._pending, strict=True)
            self._merge(np.concatenate(old_s), np.concatenate(old_d))
            self._pending, self._n_pending = [], 0
        order = self._merge(s, d)
        s = s[order]
        q_sorted = self._q = self._q_sorted()
        if self.refresh:
            self._decoys_below = np.r_[0, np.cumsum(self._decoy)]
        # equal scores share one q: read it at the first element of the group
        q_new = q_sorted[np.searchsorted(self._score, s, "left")]
        res = np.empty_like(q_new)
        res[order] = q_new
        out[ok] = res
        return out

    def threshold(self, level: float = 0.01) -> float:
        """Lowest score with q-value <= ``level`` on the last computed curve (NaN: none yet). Kept until the curve
        changes: the daemon asks after every batch, and a pass over the run each time is what a stale curve saves."""
        if self._q is None:
            return float("nan")
        if self._threshold[0] == level and self._threshold[2] is self._q:
            return self._threshold[1]
        ok = self._q <= level  # q falls as the score rises: the first True is the threshold
        i = int(np.argmax(ok))
        found = float(self._score[i]) if ok[i] else float("nan")
        self._threshold = (level, found, self._q)
        return found

    def _merge(self, s: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Insert PSMs into the sorted arrays; the order that sorts ``s`` (with ``d``)."""
        order = np.lexsort((d, s))
        s, d = s[order], d[order]
        # targets before, decoys after equal old scores: decoys rank first among ties
        pos = np.where(d, np.searchsorted(self._score, s, "right"), np.searchsorted(self._score, s, "left"))
        self._score = np.insert(self._score, pos, s)
        self._decoy = np.insert(self._decoy, pos, d)
        return order

    def _read_stale(self, s: np.ndarray, d: np.ndarray) -> np.ndarray:
        """q of new PSMs against the last computed curve (see the class docstring)."""
        assert self._q is not None and self._decoys_below is not None
        n = self._score.shape[0]
        i = np.searchsorted(self._score, s, "left")  # first element >= s: its tie group, or the next higher
        j = np.minimum(i, n - 1)
        tie = (i < n) & (self._score[j] == s)
        # this PSM's own FDR: (decoys + 1) / targets at or above it, itself included
        below = self._decoys_below[i]
        dec = self._decoys_below[-1] - below + d
        tgt = (n - i) - (self._decoys_below[-1] - below) + ~d
        own = np.minimum((dec + 1) / np.maximum(tgt, 1), 1.0)
        # a target only lowers the FDR of what is below it, so the lower score's old q bounds it from
        # above; a decoy raises it, so a decoy takes its own FDR (also an upper bound)
        lower = np.where((i > 0) & ~d, self._q[np.maximum(i - 1, 0)], 1.0)
        return np.where(tie, self._q[j], np.minimum(own, lower))

    def _read_stale_one(self, s: float, d: bool) -> float:
        """`_read_stale` of one PSM (a lone spectrum's, at a few hundred a second) in scalars: one binary search
        and a few reads, not its fifteen NumPy calls on arrays of one."""
        assert self._q is not None and self._decoys_below is not None
        score, q, below_at = self._score, self._q, self._decoys_below
        n = score.shape[0]
        i = int(np.searchsorted(score, s, "left"))
        if i < n and score[i] == s:
            return float(q[i])
        total = int(below_at[-1])
        below = int(below_at[i])
        own = min((total - below + d + 1) / max((n - i) - (total - below) + (not d), 1), 1.0)
        return min(own, float(q[i - 1])) if i > 0 and not d else own

    def _q_sorted(self) -> np.ndarray:
        s = self._score[::-1]
        d = self._decoy[::-1]
        fdr = (np.cumsum(d) + 1) / np.maximum(np.cumsum(~d), 1)
        last_of_group = np.r_[s[1:] != s[:-1], True]
        group_end = np.flatnonzero(last_of_group)
        gid = np.cumsum(np.r_[0, last_of_group[:-1].astype(np.int64)])
        fdr = fdr[group_end][gid]
        q = np.minimum(np.minimum.accumulate(fdr[::-1])[::-1], 1.0)
        return q[::-1]


def peps(score: np.ndarray, is_decoy: np.ndarray, *, bins: int = 1000) -> np.ndarray:
    """Posterior error probability of every PSM (NaN scores get 1): the chance a PSM at its score is wrong.

    Targets and decoys compete for each spectrum, so at any score the wrong targets are as dense as the decoys:
    PEP(s) = decoys(s) / targets(s). The decoy fraction is fitted non-increasing in the score by pool-adjacent-
    violators over equal-count score bins (at most ``bins``; the loop is over bins, not PSMs), then
    PEP = p / (1 - p), at most 1. Written here rather than taken from scikit-learn's `IsotonicRegression`, which
    would bring scikit-learn and SciPy into the core for one fit: 8.0 ms for 50,000 PSMs on the development
    machine (bench/library_choices.py; docs/history/RESULTS.md, 2026-11-25 10:32).
    """
    score = np.asarray(score, dtype=np.float64)
    decoy = np.asarray(is_decoy, dtype=bool)
    out = np.ones(score.shape[0])
    ok = np.flatnonzero(np.isfinite(score))
    if ok.size == 0:
        return out
    order = ok[np.argsort(score[ok], kind="stable")]  # worst first
    edges = np.unique(np.linspace(0, order.size, min(bins, order.size) + 1).astype(np.int64))
    n = np.diff(edges).astype(np.float64)
    d = np.add.reduceat(decoy[order].astype(np.float64), edges[:-1])
    fit = _decreasing(d / n, n)
    p = np.minimum(fit / np.maximum(1.0 - fit, 1e-12), 1.0)
    out[order] = np.repeat(p, np.diff(edges))
    return out


def _decreasing(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The weighted least-squares non-increasing fit of ``y`` (pool adjacent violators)."""
    values: list[float] = []
    weights: list[float] = []
    counts: list[int] = []
    for v, wt in zip(y.tolist(), w.tolist(), strict=True):
        values.append(v)
        weights.append(wt)
        counts.append(1)
        while len(values) > 1 and values[-2] < values[-1]:  # a rise: pool the two blocks
            wt2 = weights[-2] + weights[-1]
            v2 = (values[-2] * weights[-2] + values[-1] * weights[-1]) / wt2
            c2 = counts[-2] + counts[-1]
            del values[-1], weights[-1], counts[-1]
            values[-1], weights[-1], counts[-1] = v2, wt2, c2
    return np.repeat(np.asarray(values), counts)
