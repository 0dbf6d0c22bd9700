"""Tests for `rtsearch.search.fdr.RunningFdr`: q-values while a run goes on.

The running q of a batch must be what `q_values` gives on every PSM so far,
read at that batch's PSMs: FDR = (decoys + 1) / targets at or above a score
(`rtsearch.search.fdr.RULE`), decoys ranked first among equal scores, equal scores share the FDR at
the end of their group, q = the smallest FDR at this score or below, and
NaN (non-finite) scores get q = 1 and do not count.
"""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.search.fdr import RunningFdr, q_values

T, D = False, True


def test_golden_two_batches() -> None:
    rf = RunningFdr()
    assert len(rf) == 0
    # batch 1: 10 T, 9 D
    #   from the top: 10T (d0, t1) FDR (0+1)/1 = 1; 9D (d1, t1) FDR 2
    #   q = min FDR from here down, at most 1: 10T 1, 9D 1
    q1 = rf.add(np.array([10.0, 9.0]), np.array([T, D]))
    np.testing.assert_array_equal(q1, [1.0, 1.0])
    # batch 2: 8 T, 7 T, 6 T; all five from the top:
    #   10T (0,1) 1; 9D (1,1) 2; 8T (1,2) 1; 7T (1,3) 2/3; 6T (1,4) 1/2
    #   q from the bottom up: 6T 1/2, 7T min(2/3, 1/2) = 1/2, 8T 1/2
    q2 = rf.add(np.array([8.0, 7.0, 6.0]), np.array([T, T, T]))
    np.testing.assert_allclose(q2, [1 / 2, 1 / 2, 1 / 2], rtol=1e-15)
    assert len(rf) == 5


def test_golden_batch_order_inside_batch() -> None:
    # the same four PSMs in one shuffled batch: q follows each PSM, not the position
    rf = RunningFdr()
    q = rf.add(np.array([7.0, 9.0, 10.0, 8.0, 6.0]), np.array([T, D, T, T, T]))
    np.testing.assert_allclose(q, [1 / 2] * 5, rtol=1e-15)
    # 5 D below them: (2,4) 3/4, nothing under it lowers the FDR above it
    np.testing.assert_allclose(rf.add(np.array([5.0]), np.array([D])), [3 / 4], rtol=1e-15)


def test_golden_tie_decoy_after_target() -> None:
    rf = RunningFdr()
    # batch 1: 5 T alone -> (0,1) FDR 1 -> q 1
    np.testing.assert_array_equal(rf.add(np.array([5.0]), np.array([T])), [1.0])
    # batch 2: 5 D, 4 T, 4 T, 3 T. Score 5 holds D and T; decoys rank first:
    #   5D (1,0) FDR 2/max(0,1) = 2; 5T (1,1) 2 -> the group's FDR is the one at its end: 2
    #   4T 4T (1,3) 2/3 (a group); 3T (1,4) 1/2
    #   q from the bottom: 3T 1/2; group 4: 1/2; group 5: min(2, 1/2) = 1/2
    got = rf.add(np.array([5.0, 4.0, 4.0, 3.0]), np.array([D, T, T, T]))
    np.testing.assert_allclose(got, [0.5] * 4, rtol=1e-15)


def test_golden_tie_target_after_decoy() -> None:
    rf = RunningFdr()
    # 5 D alone: (1,0) FDR 2/max(0,1) = 2 -> q 1
    np.testing.assert_array_equal(rf.add(np.array([5.0]), np.array([D])), [1.0])
    # 5 T joins the tie: group {D, T} ends at (1,1) -> FDR 2, nothing below -> q 1 (a tie never flatters)
    np.testing.assert_array_equal(rf.add(np.array([5.0]), np.array([T])), [1.0])
    # 6 T above: 6T (0,1) FDR 1, group 5 now ends at (1,2) 1 -> q 1 for 6T
    np.testing.assert_array_equal(rf.add(np.array([6.0]), np.array([T])), [1.0])
    # 3 T x 4 below: (1,3) ... (1,6) share the group end 2/6 -> q 1/3 for all four
    np.testing.assert_allclose(rf.add(np.full(4, 3.0), np.array([T] * 4)), [1 / 3] * 4, rtol=1e-15)
    # a second 6 T: group 6 (0,2) 1/2, group 5 (1,3) 2/3, group 3 (1,7) 2/7 -> q 2/7
    np.testing.assert_allclose(rf.add(np.array([6.0]), np.array([T])), [2 / 7], rtol=1e-15)


def test_nan_scores_get_one_and_do_not_count() -> None:
    rf = RunningFdr()
    q = rf.add(np.array([np.nan, 10.0, np.inf, 9.0]), np.array([T, T, D, D]))
    # only 10T and 9D count: 10T (0,1) 1; 9D (1,1) 2 -> q 1, 1; NaN and inf -> 1
    np.testing.assert_array_equal(q, [1.0, 1.0, 1.0, 1.0])
    assert len(rf) == 2
    np.testing.assert_array_equal(rf.add(np.array([np.nan, np.nan]), np.array([D, T])), [1.0, 1.0])
    assert len(rf) == 2
    # later targets below: 8T (1,2) 1; 7T (1,3) 2/3; 6T (1,4) 1/2 -> q 1/2 each; the NaN rows never counted
    np.testing.assert_allclose(rf.add(np.array([8.0, 7.0, 6.0]), np.array([T, T, T])), [0.5] * 3, rtol=1e-15)


def test_empty_batch() -> None:
    rf = RunningFdr()
    out = rf.add(np.zeros(0), np.zeros(0, dtype=bool))
    assert out.shape == (0,)
    assert len(rf) == 0
    rf.add(np.array([1.0]), np.array([T]))
    assert rf.add(np.zeros(0), np.zeros(0, dtype=bool)).shape == (0,)
    assert len(rf) == 1


def test_all_decoys_then_targets() -> None:
    rf = RunningFdr()
    # 3 decoys: (1,0) (2,0) (3,0) -> FDR (d+1)/max(t,1) = 2, 3, 4 -> capped q 1
    np.testing.assert_array_equal(rf.add(np.array([3.0, 2.0, 1.0]), np.array([D, D, D])), [1.0, 1.0, 1.0])
    # 8 targets below all decoys: (3,k) -> 4/k, k = 1..8: q = 4/8 for all eight
    q = rf.add(np.linspace(0.8, 0.1, 8), np.array([T] * 8))
    np.testing.assert_allclose(q, [0.5] * 8, rtol=1e-15)


def _random_batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(0, 25))
    score = np.round(rng.normal(0.0, 1.5, n), 1)  # one decimal: many ties
    decoy = rng.random(n) < rng.uniform(0.1, 0.6)
    bad = rng.random(n)
    score[bad < 0.06] = np.nan
    score[bad > 0.99] = np.inf
    return score, decoy


@pytest.mark.parametrize("seed", range(8))
def test_running_equals_q_values_on_all_so_far(seed) -> None:
    rng = np.random.default_rng(seed)
    rf = RunningFdr()
    all_score = np.zeros(0)
    all_decoy = np.zeros(0, dtype=bool)
    n_ties = 0
    for _ in range(40):
        score, decoy = _random_batch(rng)
        got = rf.add(score, decoy)
        all_score = np.r_[all_score, score]
        all_decoy = np.r_[all_decoy, decoy]
        want = q_values(all_score, all_decoy)[all_score.shape[0] - score.shape[0] :]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        assert got.shape == score.shape
        assert ((got >= 0) & (got <= 1)).all()
        assert (got[~np.isfinite(score)] == 1.0).all()
        assert len(rf) == int(np.isfinite(all_score).sum())
        finite = all_score[np.isfinite(all_score)]
        n_ties = finite.size - np.unique(finite).size
    # the random runs did exercise ties, decoys and NaN
    assert n_ties > 100
    assert all_decoy.any() and np.isnan(all_score).any()


def test_running_equals_q_values_one_psm_at_a_time() -> None:
    rng = np.random.default_rng(99)
    rf = RunningFdr()
    score = np.round(rng.normal(0.0, 1.0, 300), 1)
    decoy = rng.random(300) < 0.4
    for i in range(300):
        got = rf.add(score[i : i + 1], decoy[i : i + 1])
        want = q_values(score[: i + 1], decoy[: i + 1])[i]
        assert got[0] == pytest.approx(want, rel=1e-12, abs=0), i


def test_refresh_golden_stale_reads_then_exact() -> None:
    rf = RunningFdr(refresh=0.5)
    # the first batch is always exact: 10T (0,1) 1; 9D (1,1) 2; 8T (1,2) 1; 7T (1,3) 2/3 -> q 2/3 each
    q = rf.add(np.array([10.0, 9.0, 8.0, 7.0]), np.array([T, D, T, T]))
    np.testing.assert_allclose(q, [2 / 3] * 4, rtol=1e-15)
    # 1 new <= 0.5 * 4 ranked: read off the curve. 9.0 ties the 9D group -> its q 2/3
    np.testing.assert_allclose(rf.add(np.array([9.0]), np.array([T])), [2 / 3], rtol=1e-15)
    # 2 pending <= 2: 7.5 falls between 8T and 7T -> min(the next lower score's q (7T: 2/3), its own FDR: 2/3)
    np.testing.assert_allclose(rf.add(np.array([7.5]), np.array([T])), [2 / 3], rtol=1e-15)
    assert len(rf) == 6
    # 3 pending > 2: everything is merged and this batch is exact again
    score = np.array([10.0, 9.0, 8.0, 7.0, 9.0, 7.5, 11.0])
    decoy = np.array([T, D, T, T, T, T, D])
    got = rf.add(score[-1:], decoy[-1:])
    np.testing.assert_allclose(got, q_values(score, decoy)[-1:], rtol=1e-15)
    # below every score, read off the curve: its own FDR, all 7 above it and itself: (2 D + 1) / 6 T = 1/2
    # (exact here: 11D 2, 10T 2, group 9 (2,2) 3/2, 8T 1, 7.5T 3/4, 7T 3/5, 1T 1/2)
    np.testing.assert_allclose(rf.add(np.array([1.0]), np.array([T])), [1 / 2], rtol=1e-15)
    assert len(rf) == 8


def test_refresh_stays_close_to_exact_one_psm_at_a_time() -> None:
    rng = np.random.default_rng(5)
    n = 3000
    score = rng.normal(0.0, 1.0, n) + 4.0 * (rng.random(n) < 0.3)  # a tail of true hits
    decoy = rng.random(n) < 0.35
    decoy[score > 3.0] = rng.random(int((score > 3.0).sum())) < 0.002
    stale, exact = RunningFdr(refresh=0.01), RunningFdr()
    a = np.array([stale.add(score[i : i + 1], decoy[i : i + 1])[0] for i in range(n)])
    b = np.array([exact.add(score[i : i + 1], decoy[i : i + 1])[0] for i in range(n)])
    assert len(stale) == len(exact) == n
    assert ((a >= 0) & (a <= 1)).all()
    late, target = slice(500, None), ~decoy[500:]
    diff = (a - b)[late]
    # targets: within 1 % of the exact q (1 % of PSMs unmerged at most); decoys may read higher, never much lower
    assert np.abs(diff[target]).max() < 0.01
    assert diff[~target].min() > -0.01
    assert np.abs(diff).max() > 0.0  # stale reads did happen
    # the identifications at 1 % within 1 % of the exact count (stale reads bound q from above)
    n_stale, n_exact = ((a <= 0.01) & ~decoy).sum(), ((b <= 0.01) & ~decoy).sum()
    assert n_exact > 500 and abs(int(n_stale) - int(n_exact)) <= 0.01 * n_exact, (n_stale, n_exact)
    with pytest.raises(ValueError):
        RunningFdr(refresh=1.0)


def test_threshold_is_the_lowest_score_at_the_level() -> None:
    rf = RunningFdr()
    assert np.isnan(rf.threshold())
    # 10T (0,1) 1; 9T (0,2) 1/2; 8D (1,2) 1; 7T (1,3) 2/3 -> q 1/2, 1/2, 2/3, 2/3
    rf.add(np.array([10.0, 9.0, 8.0, 7.0]), np.array([T, T, D, T]))
    assert np.isnan(rf.threshold(0.01))  # none at 1 %
    assert rf.threshold(0.5) == 9.0  # the lowest score with q <= 1/2
    assert rf.threshold(0.7) == 7.0  # q 2/3 <= 0.7 down to 7
    only_decoys = RunningFdr()
    only_decoys.add(np.array([3.0]), np.array([D]))
    assert np.isnan(only_decoys.threshold(0.01))


def test_threshold_follows_the_curve_as_it_is_recomputed() -> None:
    """The threshold is kept between batches read off a stale curve and follows each recomputed one: always the
    lowest score whose q on the curve last computed is <= the level (seeded)."""
    rng = np.random.default_rng(7)
    rf = RunningFdr(refresh=0.05)
    for _ in range(60):
        n = int(rng.integers(1, 40))
        decoy = rng.random(n) < 0.3
        rf.add(rng.normal(0, 1, n) + np.where(decoy, 0.0, 2.0), decoy)
        for level in (0.01, 0.05):
            assert rf._q is not None
            ok = rf._q <= level
            want = float(rf._score[int(np.argmax(ok))]) if ok.any() else float("nan")
            got = rf.threshold(level)
            assert got == want or (np.isnan(got) and np.isnan(want))


def test_a_lone_psm_reads_the_stale_curve_as_a_batch_of_one_does() -> None:
    """`RunningFdr.add` of one PSM (a lone spectrum's) reads the last curve in scalars (`_read_stale_one`): seeded
    runs with tied scores, each new PSM a target or decoy at a tied, a new, the lowest and the highest score, get the
    q-value the array path (`_read_stale`) gives a batch of one."""
    rng = np.random.default_rng(20261129)
    checked = 0
    for _ in range(40):
        fdr = RunningFdr(refresh=0.05)
        n = int(rng.integers(20, 400))
        fdr.add(np.round(rng.normal(20, 5, n), 1), rng.random(n) < 0.3)  # ties: scores to one decimal
        known = fdr._score
        for _ in range(30):
            s = float(rng.choice([rng.choice(known), rng.normal(20, 5), known.min() - 1, known.max() + 1, known.min()]))
            d = bool(rng.random() < 0.4)
            assert fdr._read_stale_one(s, d) == fdr._read_stale(np.array([s]), np.array([d]))[0], (s, d)
            checked += 1
    assert checked == 1200


def test_lone_psms_get_the_same_running_q_through_add_as_batches_of_one_did() -> None:
    rng = np.random.default_rng(7)
    fdr = RunningFdr(refresh=0.01)
    fdr.add(rng.normal(20, 5, 2000), rng.random(2000) < 0.3)
    stale = 0
    for _ in range(15):  # within the refresh: read off the stale curve
        s, d = rng.normal(20, 5, 1), rng.random(1) < 0.3
        expected = fdr._read_stale(s, d)[0]
        assert fdr.add(s, d)[0] == expected
        stale += 1
    assert stale == 15 and fdr._n_pending == 15
