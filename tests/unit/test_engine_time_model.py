"""Tests for the engine-time model (`rtsearch.serve.engine.batching.EngineTimeModel`): ``fixed + per_item * n``
fitted on observed batches, golden values worked out by hand."""

from __future__ import annotations

import pytest

from rtsearch.serve.engine.batching import EngineTimeModel


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
    m.observe(100, 0.001)  # 0.001 - 2e-5 * 100 < 0: the intercept 0, the slope down to 0.001 / 100
    assert m.fixed_s == 0.0 and m.per_item_s == pytest.approx(1e-5, rel=1e-12)
    assert m.predict(100) == pytest.approx(0.001, rel=1e-12)


def test_a_model_taught_by_dearer_spectra_than_the_runs_is_scaled_down_to_a_batch_far_faster() -> None:
    """The warm-up at a 50 Da window on NumPy (a daemon measured on the development machine): batches of 1, 7, 64 in
    5.9 ms, 113.5 ms, 1.3046 s — no fixed cost, ~20 ms a spectrum; the run's lone spectra took 6.6 ms, under a third
    of the 20.7 predicted: the fit restarts from it, fixed cost and slope scaled by 6.6 / 20.7 (a model restarted
    from the slope alone kept predicting 20.7 ms: 0 fixed + 20.7 a spectrum)."""
    m = EngineTimeModel()
    for n, s in ((1, 0.0059), (7, 0.1135), (64, 1.3046)):
        m.observe(n, s)
    assert m.fixed_s == 0.0 and m.per_item_s == pytest.approx(0.020729, rel=1e-3)
    predicted = m.predict(1)
    m.observe(1, 0.0066)
    assert m.predict(1) == pytest.approx(0.0066, rel=1e-9)
    assert m.per_item_s == pytest.approx(0.0066, rel=1e-9) and m.fixed_s == 0.0  # the shape kept: all a spectrum
    assert predicted > 3 * m.predict(1)
    m.observe(1, 0.0066 * 0.5)  # half its prediction: fitted in, not restarted (one size: the slope comes down)
    assert 0.0033 < m.predict(1) < 0.0066 and m.fixed_s == 0.0


def test_engine_time_model_ignores_bad_observations() -> None:
    m = EngineTimeModel(fixed_s=0.01, per_item_s=2e-5)
    for n, s in [(0, 0.1), (-5, 0.1), (10, float("nan")), (10, float("inf")), (10, -0.001)]:
        m.observe(n, s)
    assert (m.fixed_s, m.per_item_s) == (0.01, 2e-5)


def test_warm_up_leaves_out_batches_too_slow_at_the_last_ones_pace(monkeypatch) -> None:
    """A target that takes 20 ms a spectrum (as top-down search does, more or less): sizes 1 and 7 are scored and
    observed, 64 (1.3 s at that pace) is not with a 0.5 s bound; a fast target gets every size."""
    import time as _time
    from types import SimpleNamespace

    import numpy as np

    from rtsearch.serve.executors import engine_process
    from rtsearch.types import Spectrum

    monkeypatch.setattr(engine_process, "WARM_UP_BATCH_S", 0.5)
    monkeypatch.delenv("RTSEARCH_WARM_UP_BATCH_S", raising=False)  # (tests/conftest.py sets a shorter one)
    spectra = [Spectrum("w", k, 2, np.array([100.0]), np.ones(1, np.float32), 500.0, (2,)) for k in range(64)]
    for per_spectrum, want in ((0.02, [1, 7]), (0.0, [1, 7, 64, 512])):
        target = SimpleNamespace(warm_up_spectra=lambda n: spectra, backend=SimpleNamespace(name="numpy"))
        seen: list[int] = []

        def score(batch, per=per_spectrum):
            _time.sleep(per * len(batch))

        engine_process.warm_up(target, score, [1, 7, 64, 512], lambda size, secs, seen=seen: seen.append(size))
        assert seen == want


def test_a_clusters_unanswered_warm_up_batch_ends_the_warm_up_not_the_daemon() -> None:
    """A cluster's batch no worker answered in time (seen with top-down workers on the H200 machine: the daemon
    exited before it was ready) ends a remote warm-up with what it measured; a local engine's failure still raises."""
    from types import SimpleNamespace

    import numpy as np
    import pytest

    from rtsearch.serve.executors import engine_process
    from rtsearch.types import Spectrum

    spectra = [Spectrum("w", k, 2, np.array([100.0]), np.ones(1, np.float32), 500.0, (2,)) for k in range(8)]
    target = SimpleNamespace(warm_up_spectra=lambda n: spectra, backend=SimpleNamespace(name="numpy"))

    def score(batch):
        if len(batch) > 1:
            raise engine_process.EngineError("no live cluster worker took it within 0.1 s")

    seen: list[int] = []
    engine_process.warm_up(target, score, [1, 7, 64], lambda size, secs: seen.append(size), remote=True)
    assert seen == [1]
    with pytest.raises(engine_process.EngineError):
        engine_process.warm_up(target, score, [1, 7, 64], lambda size, secs: None)
