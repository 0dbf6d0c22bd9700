"""Tests for target-decoy q-values (`rtsearch.search.fdr`): golden values worked out by
hand, monotonicity, ties between targets and decoys, NaN scores, the
peptide level (best PSM per peptide) and `count_at`.

The documented estimate: FDR at a threshold = (decoys + 1) / targets at or above it,
equal scores share the FDR at the end of their group, q = the smallest FDR at this
score or below. The ranking machinery (ties, order, NaN) is checked on the training
estimate, decoys / targets (``plus_one=False``), whose small numbers are easier to
follow by hand; the reported one by its own golden values.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from rtsearch.search.fdr import count_at, peptide_q_values, q_ranked, q_values

T, D = False, True
plain = functools.partial(q_values, plus_one=False)  # decoys / targets: what a discriminant's training ranks by


def test_golden_reported_rule_decoys_plus_one() -> None:
    score = np.array([10, 9, 8, 7, 6, 5], dtype=float)
    decoy = np.array([T, T, D, T, D, T])
    # cumulative (decoys, targets) from the top: (0,1) (0,2) (1,2) (1,3) (2,3) (2,4)
    # FDR = (d+1)/t:                              1     1/2   1     2/3   1     3/4
    # q = min FDR from here down:                 1/2   1/2   2/3   2/3   3/4   3/4
    np.testing.assert_allclose(q_values(score, decoy), [1 / 2, 1 / 2, 2 / 3, 2 / 3, 3 / 4, 3 / 4], rtol=1e-12)


def test_a_list_at_one_percent_needs_a_hundred_targets() -> None:
    # n targets, then decoys only: the best q is 1/n, at or below 0.01 only from n = 100
    for n, accepted in ((99, 0), (100, 100), (150, 150)):
        decoy = np.r_[np.zeros(n, bool), np.ones(50, bool)]
        q = q_values(-np.arange(n + 50, dtype=float), decoy)
        assert q[0] == pytest.approx(1 / n, rel=1e-12)
        assert count_at(q, decoy) == accepted
    # a run with no true match: targets and decoys alternate; nothing at 1 % (or at 20 %), where decoys / targets
    # gave the first target q = 0
    decoy = np.arange(400) % 2 == 1
    assert count_at(q_values(-np.arange(400.0), decoy), decoy, 0.2) == 0
    assert plain(-np.arange(400.0), decoy)[0] == 0.0


def test_golden_small_list() -> None:
    score = np.array([10, 9, 8, 7, 6, 5], dtype=float)
    decoy = np.array([T, T, D, T, D, T])
    # cumulative (decoys, targets) from the top: (0,1) (0,2) (1,2) (1,3) (2,3) (2,4)
    # FDR = d/t:                                  0     0     1/2   1/3   2/3   2/4
    # q = min FDR from here down:                 0     0     1/3   1/3   1/2   1/2
    want = [0, 0, 1 / 3, 1 / 3, 1 / 2, 1 / 2]
    np.testing.assert_allclose(plain(score, decoy), want, rtol=1e-12)


def test_golden_input_order_does_not_matter() -> None:
    score = np.array([10, 9, 8, 7, 6, 5], dtype=float)
    decoy = np.array([T, T, D, T, D, T])
    want = np.array([0, 0, 1 / 3, 1 / 3, 1 / 2, 1 / 2])
    perm = np.random.default_rng(7).permutation(6)
    np.testing.assert_allclose(plain(score[perm], decoy[perm]), want[perm], rtol=1e-12)


def test_top_decoy_and_all_decoys() -> None:
    # decoy first: (1,0) -> FDR 1/max(0,1) = 1; then (1,1) 1; (1,2) 1/2
    # q: min over rest = [1/2, 1/2, 1/2]
    np.testing.assert_allclose(plain(np.array([3.0, 2.0, 1.0]), np.array([D, T, T])), [0.5] * 3)
    # only decoys: FDR = d / 1 capped at 1
    np.testing.assert_allclose(plain(np.array([3.0, 2.0]), np.array([D, D])), [1.0, 1.0])
    # only targets: 0
    np.testing.assert_allclose(plain(np.array([3.0, 2.0]), np.array([T, T])), [0.0, 0.0])


def test_ties_share_the_fdr_at_the_end_of_their_group() -> None:
    # scores 3 | 2 2 | 1 with the decoy in the tie
    # at threshold 3: (d,t) = (0,1) -> 0; at 2 (the whole tie): (1,2) -> 1/2; at 1: (1,3) -> 1/3
    # q: 3 -> 0; the tie (target and decoy alike) -> min(1/2, 1/3) = 1/3; 1 -> 1/3
    score = np.array([3.0, 2.0, 2.0, 1.0])
    want = np.array([0.0, 1 / 3, 1 / 3, 1 / 3])
    for decoy in (np.array([T, T, D, T]), np.array([T, D, T, T])):
        np.testing.assert_allclose(plain(score, decoy), want, rtol=1e-12)


def test_tie_target_never_gets_a_better_q_than_the_tied_decoy() -> None:
    # 5 | 4 4 : at 5 (0,1) -> 0, at 4 (1,2) -> 1/2; the tied target must not keep q = 0
    for decoy in (np.array([T, T, D]), np.array([T, D, T])):
        q = plain(np.array([5.0, 4.0, 4.0]), decoy)
        np.testing.assert_allclose(q, [0.0, 0.5, 0.5])


def test_ties_whole_list() -> None:
    # everything tied: one group, (d,t) = (2,3) -> 2/3 for all
    q = plain(np.full(5, 7.0), np.array([T, D, T, D, T]))
    np.testing.assert_allclose(q, [2 / 3] * 5)


def test_nan_scores_get_q_one() -> None:
    score = np.array([10.0, np.nan, 9.0, 8.0, np.nan])
    decoy = np.array([T, T, D, T, D])
    q = plain(score, decoy)
    assert q[1] == 1.0 and q[4] == 1.0
    # the others as if the NaN rows were absent: (0,1) 0, (1,1) 1, (1,2) 1/2 -> q 0, 1/2, 1/2
    np.testing.assert_allclose(q[[0, 2, 3]], [0.0, 0.5, 0.5])
    np.testing.assert_array_equal(plain(np.full(3, np.nan), np.array([T, D, T])), [1.0, 1.0, 1.0])
    assert plain(np.zeros(0), np.zeros(0, dtype=bool)).shape == (0,)


def test_q_values_monotone_and_bounded_random() -> None:
    rng = np.random.default_rng(12345)
    n = 2000
    decoy = rng.random(n) < 0.4
    # targets score higher on average; rounding makes many ties
    score = np.round(rng.normal(np.where(decoy, 0.0, 1.5), 1.0), 1)
    q = q_values(score, decoy)
    assert np.all((q >= 0) & (q <= 1))
    order = np.argsort(-score, kind="stable")
    assert np.all(np.diff(q[order]) >= -1e-15)  # q never decreases as the score goes down
    # equal scores, equal q
    for s in np.unique(score)[:50]:
        assert np.ptp(q[score == s]) == 0.0
    # brute force for a few thresholds: q(s) = min over s' <= s of (D(s') + 1) / T(s')
    for s in np.unique(score)[::17]:
        fdrs = [
            (np.sum(decoy & (score >= t)) + 1) / max(np.sum(~decoy & (score >= t)), 1)
            for t in np.unique(score) if t <= s
        ]  # fmt: skip
        assert q[score == s][0] == pytest.approx(min(min(fdrs), 1.0), abs=1e-12)


def test_peptide_q_values_best_psm_per_peptide() -> None:
    # PSMs (score, peptide, decoy): A 10 T, A 3 T, B 9 D, C 8 T, D 2 T, C 1 T
    score = np.array([10.0, 3.0, 9.0, 8.0, 2.0, 1.0])
    peptide = np.array(["A", "A", "B", "C", "D", "C"])
    decoy = np.array([T, T, D, T, T, T])
    # peptides by best PSM: A 10 T, B 9 D, C 8 T, D 2 T
    # (d,t): (0,1) 1, (1,1) 2, (1,2) 1, (1,3) 2/3 -> (d+1)/t, q: 2/3 for every peptide
    q = peptide_q_values(score, decoy, peptide)
    np.testing.assert_allclose(q, [2 / 3] * 6)
    # PSM-level differs: 10 T, 9 D, 8 T, 3 T, 2 T, 1 T -> (d+1)/t 1, 2, 1, 2/3, 1/2, 2/5: A's second PSM 2/5
    assert q_values(score, decoy)[1] == pytest.approx(2 / 5, rel=1e-12)


def test_peptide_q_values_nan_and_integer_keys() -> None:
    score = np.array([5.0, np.nan, 4.0, 6.0])
    peptide = np.array([7, 7, 3, 9])
    decoy = np.array([T, T, D, T])
    # peptides: 9 (6, T), 7 (5, T), 3 (4, D): (d+1)/t (0,1) 1, (0,2) 1/2, (1,2) 1 -> q 1/2, 1/2, 1
    q = peptide_q_values(score, decoy, peptide)
    np.testing.assert_allclose(q, [0.5, 1.0, 1.0, 0.5])


def test_count_at() -> None:
    q = np.array([0.0, 0.005, 0.01, 0.011, 0.0, 0.2])
    decoy = np.array([T, T, T, T, D, T])
    assert count_at(q, decoy) == 3  # targets at q <= 0.01 (the boundary included)
    assert count_at(q, decoy, level=0.0) == 1
    assert count_at(q, decoy, level=0.05) == 4
    assert count_at(q, decoy, level=1.0) == 5
    assert count_at(np.zeros(0), np.zeros(0, dtype=bool)) == 0


def test_count_at_golden_list() -> None:
    score = np.array([10, 9, 8, 7, 6, 5], dtype=float)
    decoy = np.array([T, T, D, T, D, T])
    q = q_values(score, decoy)  # 1/2, 1/2, 2/3, 2/3, 3/4, 3/4 (`test_golden_reported_rule_decoys_plus_one`)
    assert count_at(q, decoy, 0.49) == 0
    assert count_at(q, decoy, 0.5) == 2
    assert count_at(q, decoy, 0.67) == 3
    assert count_at(q, decoy, 0.75) == 4


def test_q_values_equal_the_definition_on_tied_scores() -> None:
    # q_i = min over thresholds t <= score_i of (decoys(>= t) + 1) / max(targets(>= t), 1), by brute force
    rng = np.random.default_rng(20241124)
    for _ in range(20):
        n = int(rng.integers(1, 300))
        score = rng.integers(0, 12, n).astype(float)  # many ties
        score[rng.random(n) < 0.05] = np.nan
        decoy = rng.random(n) < 0.4
        finite = np.isfinite(score)
        ts = np.unique(score[finite])
        fdr = {t: (decoy[finite & (score >= t)].sum() + 1) / max((~decoy[finite & (score >= t)]).sum(), 1) for t in ts}
        want = np.array([min(1.0, min(fdr[t] for t in ts if t <= s)) if np.isfinite(s) else 1.0 for s in score])
        np.testing.assert_allclose(q_values(score, decoy), want, rtol=1e-12)
        order = np.flatnonzero(finite)[np.argsort(score[finite])]  # ranked worst first: q_ranked on the reverse
        np.testing.assert_allclose(q_ranked(score[order][::-1], decoy[order][::-1]), want[order][::-1], rtol=1e-12)


def test_peps_by_hand_and_on_a_seeded_mixture() -> None:
    from rtsearch.search.fdr import peps

    # four bins of one PSM, worst first: decoy, target, decoy, target -> decoy fractions 1, 0, 1, 0; pooled
    # non-increasing: 1, 0.5, 0.5, 0 -> PEP = p / (1 - p): 1 (capped), 1, 1, 0
    got = peps(np.array([1.0, 2.0, 3.0, 4.0]), np.array([True, False, True, False]), bins=4)
    assert got.tolist() == [1.0, 1.0, 1.0, 0.0]
    # targets: 3,000 right (score ~ N(4, 1)) and 2,000 wrong; decoys: 2,000 wrong (score ~ N(0, 1))
    rng = np.random.default_rng(7)
    score = np.r_[rng.normal(4, 1, 3000), rng.normal(0, 1, 2000), rng.normal(0, 1, 2000)]
    decoy = np.r_[np.zeros(5000, bool), np.ones(2000, bool)]
    pep = peps(score, decoy, bins=200)
    order = np.argsort(score)
    assert np.all(np.diff(pep[order]) <= 1e-12)  # never more likely wrong at a higher score
    assert pep[score < -1].min() > 0.8 and pep[score > 5].max() < 0.02
    # calibrated: summed over the targets above 2, PEP counts the wrong ones there (2,000 x P(N(0,1) > 2) = 45.5)
    above = (score > 2) & ~decoy
    assert abs(pep[above].sum() - 2000 * 0.02275) < 25, pep[above].sum()
    assert peps(np.array([np.nan, 1.0]), np.array([False, False])).tolist() == [1.0, 0.0]
