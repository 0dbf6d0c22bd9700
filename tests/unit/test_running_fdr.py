"""Tests for `rtsearch.search.fdr.RunningFdr`: q-values while a run goes on.

The running q of a batch must be what `q_values` gives on every PSM so far,
read at that batch's PSMs: FDR = decoys / targets at or above a score (no
+1), decoys ranked first among equal scores, equal scores share the FDR at
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
    #   from the top: 10T (d0, t1) FDR 0; 9D (d1, t1) FDR 1
    #   q = min FDR from here down: 10T 0, 9D 1
    q1 = rf.add(np.array([10.0, 9.0]), np.array([T, D]))
    np.testing.assert_array_equal(q1, [0.0, 1.0])
    # batch 2: 8 T, 7 T; all four from the top:
    #   10T (0,1) 0; 9D (1,1) 1; 8T (1,2) 1/2; 7T (1,3) 1/3
    #   q from the bottom up: 7T 1/3, 8T min(1/2, 1/3) = 1/3, 9D 1/3, 10T 0
    q2 = rf.add(np.array([8.0, 7.0]), np.array([T, T]))
    np.testing.assert_allclose(q2, [1 / 3, 1 / 3], rtol=1e-15)
    assert len(rf) == 4


def test_golden_batch_order_inside_batch() -> None:
    # the same four PSMs in one shuffled batch: q follows each PSM, not the position
    rf = RunningFdr()
    q = rf.add(np.array([7.0, 9.0, 10.0, 8.0]), np.array([T, D, T, T]))
    np.testing.assert_allclose(q, [1 / 3, 1 / 3, 0.0, 1 / 3], rtol=1e-15)


def test_golden_tie_decoy_after_target() -> None:
    rf = RunningFdr()
    # batch 1: 5 T alone -> (0,1) FDR 0 -> q 0
    np.testing.assert_array_equal(rf.add(np.array([5.0]), np.array([T])), [0.0])
    # batch 2: 5 D, 4 T. Score 5 holds D and T; decoys rank first:
    #   5D (1,0) FDR 1/max(0,1) = 1; 5T (1,1) 1 -> the group's FDR is the one at its end: 1
    #   4T (1,2) 1/2
    #   q from the bottom: 4T 1/2; group 5: min(1, 1/2) = 1/2
    np.testing.assert_allclose(rf.add(np.array([5.0, 4.0]), np.array([D, T])), [0.5, 0.5], rtol=1e-15)


def test_golden_tie_target_after_decoy() -> None:
    rf = RunningFdr()
    # 5 D alone: (1,0) FDR 1/max(0,1) = 1
    np.testing.assert_array_equal(rf.add(np.array([5.0]), np.array([D])), [1.0])
    # 5 T joins the tie: group {D, T} ends at (1,1) -> FDR 1, nothing below -> q 1 (a tie never flatters)
    np.testing.assert_array_equal(rf.add(np.array([5.0]), np.array([T])), [1.0])
    # 6 T above: 6T (0,1) FDR 0, group 5 now ends at (1,2) 1/2 -> q 0 for 6T
    np.testing.assert_array_equal(rf.add(np.array([6.0]), np.array([T])), [0.0])
    # 3 T, 3 T below: (1,3) 1/3 and (1,4) 1/4 share the group end 1/4 -> q 1/4 for both
    np.testing.assert_allclose(rf.add(np.array([3.0, 3.0]), np.array([T, T])), [0.25, 0.25], rtol=1e-15)


def test_nan_scores_get_one_and_do_not_count() -> None:
    rf = RunningFdr()
    q = rf.add(np.array([np.nan, 10.0, np.inf, 9.0]), np.array([T, T, D, D]))
    # only 10T and 9D count: 10T (0,1) 0; 9D (1,1) 1 -> q 0, 1; NaN and inf -> 1
    np.testing.assert_array_equal(q, [1.0, 0.0, 1.0, 1.0])
    assert len(rf) == 2
    np.testing.assert_array_equal(rf.add(np.array([np.nan, np.nan]), np.array([D, T])), [1.0, 1.0])
    assert len(rf) == 2
    # a later target below: 10T 0; 9D (1,1) 1; 8T (1,2) 1/2 -> q 1/2
    np.testing.assert_allclose(rf.add(np.array([8.0]), np.array([T])), [0.5], rtol=1e-15)


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
    # 3 decoys: (1,0) (2,0) (3,0) -> FDR d/max(t,1) = 1, 2, 3 -> capped q 1
    np.testing.assert_array_equal(rf.add(np.array([3.0, 2.0, 1.0]), np.array([D, D, D])), [1.0, 1.0, 1.0])
    # 4 targets below all decoys: (3,1) 3 (3,2) 1.5 (3,3) 1 (3,4) 0.75 -> q 0.75 for all four
    q = rf.add(np.array([0.4, 0.3, 0.2, 0.1]), np.array([T, T, T, T]))
    np.testing.assert_allclose(q, [0.75] * 4, rtol=1e-15)


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
    # the first batch is always exact: 10T 0; 9D (1,1) 1; 8T (1,2) 1/2; 7T (1,3) 1/3 -> q 0, 1/3, 1/3, 1/3
    q = rf.add(np.array([10.0, 9.0, 8.0, 7.0]), np.array([T, D, T, T]))
    np.testing.assert_allclose(q, [0.0, 1 / 3, 1 / 3, 1 / 3], rtol=1e-15)
    # 1 new <= 0.5 * 4 ranked: read off the curve. 9.0 ties the 9D group -> its q 1/3
    np.testing.assert_allclose(rf.add(np.array([9.0]), np.array([T])), [1 / 3], rtol=1e-15)
    # 2 pending <= 2: 7.5 falls between 8T and 7T -> the next lower score's q (7T: 1/3)
    np.testing.assert_allclose(rf.add(np.array([7.5]), np.array([T])), [1 / 3], rtol=1e-15)
    assert len(rf) == 6
    # 3 pending > 2: everything is merged and this batch is exact again
    score = np.array([10.0, 9.0, 8.0, 7.0, 9.0, 7.5, 11.0])
    decoy = np.array([T, D, T, T, T, T, D])
    got = rf.add(score[-1:], decoy[-1:])
    np.testing.assert_allclose(got, q_values(score, decoy)[-1:], rtol=1e-15)
    # below every score, read off the curve: its own FDR, all 7 above it and itself: 2 D / 6 T = 1/3
    # (exact here: 11D 1, 10T 1, group 9 (2,2) 1, 8T 2/3, 7.5T 1/2, 7T 2/5, 1T 1/3)
    np.testing.assert_allclose(rf.add(np.array([1.0]), np.array([T])), [1 / 3], rtol=1e-15)
    assert len(rf) == 8


def test_refresh_stays_close_to_exact_one_psm_at_a_time() -> None:
    rng = np.random.default_rng(5)
    n = 3000
    score = rng.normal(0.0, 1.0, n) + 2.5 * (rng.random(n) < 0.3)  # a tail of true hits
    decoy = rng.random(n) < 0.35
    decoy[score > 2.5] = rng.random(int((score > 2.5).sum())) < 0.05
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
    # the same identifications at 1 %
    assert ((a <= 0.01) & ~decoy).sum() == ((b <= 0.01) & ~decoy).sum() > 50
    with pytest.raises(ValueError):
        RunningFdr(refresh=1.0)


def test_threshold_is_the_lowest_score_at_the_level() -> None:
    rf = RunningFdr()
    assert np.isnan(rf.threshold())
    # 10T 0; 9T 0; 8D (1,2) 1/2; 7T (1,3) 1/3 -> q 0, 0, 1/3, 1/3: lowest score with q <= 0.01 is 9
    rf.add(np.array([10.0, 9.0, 8.0, 7.0]), np.array([T, T, D, T]))
    assert rf.threshold(0.01) == 9.0
    assert rf.threshold(0.5) == 7.0  # q 1/3 <= 0.5 down to 7
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
