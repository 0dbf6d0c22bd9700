"""E-values of PrSMs: the binomial tail against values worked out by hand, and the model's monotonicity."""

from __future__ import annotations

import math

import pytest

from rtsearch.scoring.topdown.evalue import LOG10_FLOOR, chance, log10_binomial_tail, log10_evalue


def test_binomial_tail_by_hand() -> None:
    # P(X >= 2), X ~ Bin(3, 1/2) = (3 + 1) / 8 = 0.5
    assert log10_binomial_tail(2, 3, 0.5) == pytest.approx(math.log10(0.5))
    # P(X >= 3), X ~ Bin(3, 0.1) = 0.001
    assert log10_binomial_tail(3, 3, 0.1) == pytest.approx(-3.0)
    # P(X >= 1), X ~ Bin(10, 0.2) = 1 - 0.8^10
    assert log10_binomial_tail(1, 10, 0.2) == pytest.approx(math.log10(1 - 0.8**10))
    # a tail far out: P(X >= 40), X ~ Bin(200, 0.01) against the direct sum
    direct = sum(math.comb(200, i) * 0.01**i * 0.99 ** (200 - i) for i in range(40, 201))
    assert log10_binomial_tail(40, 200, 0.01) == pytest.approx(math.log10(direct), rel=1e-9)
    assert log10_binomial_tail(0, 10, 0.3) == 0.0 and log10_binomial_tail(11, 10, 0.3) == LOG10_FLOOR


def test_chance_of_a_coincidence() -> None:
    # 50 PRMs over 10 kDa at ±0.02 Da: 1 - exp(-2 * 0.02 * 50 / 10000)
    assert chance(50, 10_000.0, 0.02) == pytest.approx(1 - math.exp(-2e-4))
    assert chance(0, 10_000.0, 0.02) == 0.0 and chance(10, 0.0, 0.02) == 0.0


def test_evalue_grows_with_chance_and_candidates() -> None:
    base = log10_evalue(10, 1, 100, 50, 10_000.0, 0.02, 1000.0)
    assert log10_evalue(12, 1, 100, 50, 10_000.0, 0.02, 1000.0) < base  # a higher score
    assert log10_evalue(10, 1, 300, 50, 10_000.0, 0.02, 1000.0) > base  # a longer proteoform
    assert log10_evalue(10, 1, 100, 150, 10_000.0, 0.02, 1000.0) > base  # a denser spectrum
    assert log10_evalue(10, 0, 100, 50, 10_000.0, 0.02, 1000.0) < base  # no shift: one diagonal
    assert log10_evalue(10, 1, 100, 50, 10_000.0, 0.02, 10_000.0) == pytest.approx(base + 1)  # 10x the candidates


def test_tails_of_a_batch_are_each_rows_own() -> None:
    """Rows of every kind at once (k <= 0, k > n, p = 0, p = 1, long and short tails): each row's value is the
    one its own direct sum gives, whatever its neighbours."""
    import numpy as np

    from rtsearch.scoring.topdown.evalue import log10_binomial_tails

    k = np.array([2, 0, 11, 3, 40, 1, 5, 1])
    n = np.array([3, 10, 10, 3, 200, 10, 5, 4])
    p = np.array([0.5, 0.3, 0.3, 0.0, 0.01, 0.2, 1.0, 0.25])
    got = log10_binomial_tails(k, n, p)
    for row in range(len(k)):
        ki, ni, pi = int(k[row]), int(n[row]), float(p[row])
        if ki <= 0:
            want = 0.0
        elif ki > ni or pi <= 0.0:
            want = LOG10_FLOOR
        else:
            want = math.log10(sum(math.comb(ni, i) * pi**i * (1 - pi) ** (ni - i) for i in range(ki, ni + 1)))
        assert got[row] == pytest.approx(want, rel=1e-9, abs=1e-12), row
