"""Tests for the engine-time model (`rtsearch.serve.batching.EngineTimeModel`): ``fixed + per_item * n``
fitted on observed batches, golden values worked out by hand."""

from __future__ import annotations

import pytest

from rtsearch.serve.batching import EngineTimeModel


def test_engine_time_model_prior() -> None:
    m = EngineTimeModel(fixed_s=0.01, per_item_s=2e-5)
    assert m.predict(0) == 0.01
    assert m.predict(100) == pytest.approx(0.012, abs=1e-15)


def test_engine_time_model_fits_noiseless_line() -> None:
    m = EngineTimeModel()  # prior 0.01 + 2e-5 n
    for _ in range(3):
        for n in (1, 8, 64, 300, 1000, 4096):
            m.observe(n, 0.002 + 1e-5 * n)
    assert abs(m.fixed_s - 0.002) < 1e-9
    assert abs(m.per_item_s - 1e-5) < 1e-9
    assert m.predict(250) == pytest.approx(0.002 + 0.0025, abs=1e-9)


def test_engine_time_model_fits_two_sizes() -> None:
    m = EngineTimeModel(fixed_s=0.05, per_item_s=1e-3, halflife=8)
    m.observe(10, 0.003 + 2e-6 * 10)
    m.observe(1000, 0.003 + 2e-6 * 1000)
    assert abs(m.fixed_s - 0.003) < 1e-9
    assert abs(m.per_item_s - 2e-6) < 1e-9


def test_engine_time_model_one_size_keeps_prior_slope() -> None:
    m = EngineTimeModel(fixed_s=0.01, per_item_s=2e-5)
    for _ in range(10):
        m.observe(100, 0.005)
    # slope stays 2e-5; intercept fitted: 0.005 - 2e-5 * 100 = 0.003
    assert m.per_item_s == 2e-5
    assert abs(m.fixed_s - 0.003) < 1e-12
    assert m.predict(100) == pytest.approx(0.005, abs=1e-12)


def test_engine_time_model_intercept_not_negative() -> None:
    m = EngineTimeModel(fixed_s=0.01, per_item_s=2e-5)
    m.observe(100, 0.001)  # 0.001 - 0.002 < 0 -> 0
    assert m.fixed_s == 0.0 and m.per_item_s == 2e-5


def test_engine_time_model_ignores_bad_observations() -> None:
    m = EngineTimeModel(fixed_s=0.01, per_item_s=2e-5)
    for n, s in [(0, 0.1), (-5, 0.1), (10, float("nan")), (10, float("inf")), (10, -0.001)]:
        m.observe(n, s)
    assert (m.fixed_s, m.per_item_s) == (0.01, 2e-5)
