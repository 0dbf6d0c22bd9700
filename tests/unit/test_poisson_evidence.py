"""The Poisson feature (`features.poisson_evidence`): -log10 P(X >= matched), X ~ Poisson(expected).

Golden values by hand, and the in-place arithmetic equal, bit for bit, to the expression it replaced
(`plain`)."""

from __future__ import annotations

import math

import numpy as np

from rtsearch.scoring.database.features import _LOG_FACTORIAL, poisson_evidence


def plain(matched: np.ndarray, expected: np.ndarray, terms: int = 60) -> np.ndarray:
    """`poisson_evidence` as one expression (five [S, 60] temporaries; what it was before 2026-11-29)."""
    k = np.minimum(matched[:, None] + np.arange(terms)[None, :], _LOG_FACTORIAL.shape[0] - 1)
    lam = np.maximum(expected, 1e-12)[:, None]
    logp = k * np.log(lam) - lam - _LOG_FACTORIAL[k]
    top = logp.max(axis=1, keepdims=True)
    log_tail = top[:, 0] + np.log(np.exp(logp - top).sum(axis=1))
    return np.maximum(-log_tail / np.log(10.0), 0.0)


def test_golden_values() -> None:
    got = poisson_evidence(np.array([0, 1, 2, 3]), np.array([4.0, 1.0, 1.0, 0.5]))
    # P(X >= 0) = 1; P(X >= 1) = 1 - e^-1; P(X >= 2) = 1 - 2 e^-1; P(X >= 3 | 0.5) = 1 - e^-0.5 (1 + 0.5 + 0.125)
    want = [0.0, -math.log10(1 - math.exp(-1)), -math.log10(1 - 2 * math.exp(-1)),
            -math.log10(1 - math.exp(-0.5) * 1.625)]  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_the_in_place_arithmetic_is_the_expressions() -> None:
    rng = np.random.default_rng(11)
    for n in (1, 7, 256, 2048):
        matched = rng.integers(0, 200, n)
        matched[:3] = [0, 4095, 5000][: min(3, n)]  # the log-factorial table's end, and past it
        expected = rng.uniform(0.0, 40.0, n)
        expected[: min(2, n)] = [0.0, 1e-300][: min(2, n)]  # floored at 1e-12
        np.testing.assert_array_equal(poisson_evidence(matched, expected), plain(matched, expected))
