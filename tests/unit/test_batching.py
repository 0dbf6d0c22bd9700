"""Tests for the micro-batcher (`rtsearch.serve.engine.batching`), driven by a fake clock in ns.

Golden times are worked out by hand in the comments: a spectrum added at
``t`` with budget ``b`` ms has its deadline at ``t + b``; the deadline rule
flushes at ``deadline - predict(n) - margin``; `wake_at` is the earlier of
that and ``oldest arrival + linger``.
"""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.serve.engine.batching import MS, BatchPolicy, EngineTimeModel, MicroBatcher, expiry_slack_ms
from tests.fakeclock import FakeClock
from tests.unit.named_batcher import batcher as _batcher

# ---------------------------------------------------------------- policy


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_batch": 0},
        {"max_batch": 10, "max_queue": 9},
        {"linger_ms": -0.1},
        {"margin_ms": -1.0},
        {"slack_ms": -1.0},
    ],
)
def test_policy_rejects_bad_limits(kwargs) -> None:
    with pytest.raises(ValueError):
        BatchPolicy(**kwargs)


def test_policy_defaults() -> None:
    p = BatchPolicy()
    assert (p.max_batch, p.max_queue, p.linger_ms, p.margin_ms, p.slack_ms) == (4096, 32768, 0.0, 1.0, 25.0)


def test_the_expiry_slack_can_be_set_for_a_measurement_and_is_what_admission_reserves(monkeypatch) -> None:
    monkeypatch.delenv("RTSEARCH_EXPIRY_SLACK_MS", raising=False)
    assert expiry_slack_ms() == 25.0
    monkeypatch.setenv("RTSEARCH_EXPIRY_SLACK_MS", "5")
    assert expiry_slack_ms() == 5.0
    for bad in ("-1", "nan", "fast"):  # not a number >= 0: the default, not a failure
        monkeypatch.setenv("RTSEARCH_EXPIRY_SLACK_MS", bad)
        assert expiry_slack_ms() == 25.0
    # a newcomer must be predicted answered margin + slack before its deadline; one is given up lead_ns before it
    model = EngineTimeModel(fixed_s=0.002, per_item_s=0.0)
    b = MicroBatcher(BatchPolicy(margin_ms=1.0, slack_ms=5.0), model, lambda: 0)
    assert b.headroom_ns() == 6 * MS and b.lead_ns() == 8 * MS


# ---------------------------------------------------------------- when a batch goes


def test_linger_zero_takes_at_once_when_a_worker_is_free() -> None:
    b, clock = _batcher(linger_ms=0)
    assert b.take(workers_free=1) is None  # nothing waits
    clock.at_ms(3)
    assert b.add("a", mass=1000.0, budget_ms=20)
    assert len(b) == 1
    assert b.take(workers_free=0) is None  # no worker: it waits
    assert len(b) == 1
    assert b.take(workers_free=1) == ["a"]  # same instant, no linger
    assert len(b) == 0
    assert b.take(workers_free=1) is None


def test_linger_zero_takes_everything_waiting() -> None:
    b, clock = _batcher(linger_ms=0)
    for name, mass in [("a", 1500.0), ("b", 900.0), ("c", 1200.0)]:
        b.add(name, mass=mass, budget_ms=20)
    assert b.take(workers_free=2) == ["b", "c", "a"]  # sorted by mass
    assert len(b) == 0


def test_full_batch_goes_without_linger() -> None:
    b, clock = _batcher(max_batch=3, linger_ms=50)
    b.add("a", mass=1300.0, budget_ms=1000)
    b.add("b", mass=1100.0, budget_ms=1000)
    assert b.take(workers_free=1) is None  # 2 < max_batch, linger (50 ms) not passed, deadline far
    b.add("c", mass=1200.0, budget_ms=1000)
    assert b.take(workers_free=0) is None  # full, but no worker
    assert clock() == 0
    assert b.take(workers_free=1) == ["b", "c", "a"]
    assert len(b) == 0


def test_linger_five_ms() -> None:
    # linger 5 ms, budget 20 ms, engine 4 ms + 0 per item, margin 1 ms, added at t = 0:
    #   linger ends at 0 + 5 = 5 ms; deadline rule at 20 - 4 - 1 = 15 ms; wake = min(5, 15) = 5 ms
    b, clock = _batcher(linger_ms=5, fixed_s=0.004, per_item_s=0.0, margin_ms=1)
    b.add("a", mass=1000.0, budget_ms=20)
    assert b.flush_at() == 15_000_000
    assert b.wake_at() == 5_000_000
    for t_ms in (0, 1, 4.999, 4.999999):
        clock.at_ms(t_ms)
        assert b.take(workers_free=1) is None, t_ms
    clock.ns = 4_999_999
    assert b.take(workers_free=1) is None
    clock.ns = 5_000_000
    assert b.take(workers_free=0) is None
    assert b.take(workers_free=1) == ["a"]


def test_deadline_rule_flushes_before_linger() -> None:
    # linger 50 ms, budget 20 ms, engine 4 ms, margin 1 ms, added at t = 0:
    #   linger ends at 50 ms; deadline rule at 20 - 4 - 1 = 15 ms; wake = min(50, 15) = 15 ms
    b, clock = _batcher(linger_ms=50, fixed_s=0.004, per_item_s=0.0, margin_ms=1)
    b.add("a", mass=1000.0, budget_ms=20)
    assert b.flush_at() == 15_000_000
    assert b.wake_at() == 15_000_000
    clock.at_ms(14.999)
    assert b.take(workers_free=1) is None
    clock.ns = 14_999_999
    assert b.take(workers_free=1) is None
    clock.at_ms(15)
    assert b.take(workers_free=1) == ["a"]


def test_deadline_rule_late_arrival_with_tighter_budget() -> None:
    # linger 50, margin 1, engine 4 ms + 1 ms per item:
    #   a at t = 0 with budget 30 -> deadline 30 ms
    #   b at t = 2 with budget 20 -> deadline 22 ms (the earliest)
    #   n = 2 -> predict = 4 + 2*1 = 6 ms; flush = 22 - 6 - 1 = 15 ms
    #   oldest arrival 0 -> linger ends at 50 ms; wake = min(50, 15) = 15 ms
    b, clock = _batcher(linger_ms=50, fixed_s=0.004, per_item_s=0.001, margin_ms=1)
    b.add("a", mass=1000.0, budget_ms=30)
    # alone: flush = 30 - (4 + 1) - 1 = 24 ms
    assert b.flush_at() == 24_000_000
    clock.at_ms(2)
    b.add("b", mass=900.0, budget_ms=20)
    assert b.flush_at() == 15_000_000
    assert b.wake_at() == 15_000_000
    clock.ns = 14_999_999
    assert b.take(workers_free=1) is None
    clock.ns = 15_000_000
    assert b.take(workers_free=1) == ["b", "a"]


def test_deadline_prediction_uses_at_most_max_batch() -> None:
    # max_batch 2, 5 waiting, engine 4 ms + 1 ms per item: predict(min(5, 2)) = 6 ms
    #   budget 20 at t = 0 -> flush = 20 - 6 - 1 = 13 ms (not 20 - 9 - 1 = 10 ms)
    b, _ = _batcher(max_batch=2, linger_ms=50, fixed_s=0.004, per_item_s=0.001, margin_ms=1)
    # a full batch would go at once, so check flush_at without taking
    for i in range(5):
        b.add(str(i), mass=1000.0 + i, budget_ms=20)
    assert b.flush_at() == 13_000_000


def test_wake_at_values() -> None:
    b, clock = _batcher(linger_ms=5, fixed_s=0.004, per_item_s=0.0, margin_ms=1)
    assert b.wake_at() is None and b.flush_at() is None
    clock.at_ms(10)
    b.add("a", mass=1000.0, budget_ms=100)
    # linger: 10 + 5 = 15 ms; deadline: 110 - 4 - 1 = 105 ms
    assert b.wake_at() == 15_000_000
    clock.at_ms(12)
    b.add("b", mass=1000.0, budget_ms=6)
    # the oldest (a) sets the linger: 15 ms; b's deadline: 12 + 6 - 4 - 1 = 13 ms -> wake 13 ms
    assert b.flush_at() == 13_000_000
    assert b.wake_at() == 13_000_000
    clock.at_ms(13)
    assert b.take(workers_free=1) == ["a", "b"]
    assert b.wake_at() is None


def test_wake_at_in_the_past_takes_at_once() -> None:
    # budget 3 ms < engine 4 ms + margin 1 ms: the flush time lies before the arrival
    b, clock = _batcher(linger_ms=50, fixed_s=0.004, margin_ms=1)
    clock.at_ms(100)
    b.add("a", mass=1000.0, budget_ms=3)
    assert b.wake_at() == 98_000_000  # 100 + 3 - 4 - 1
    assert b.take(workers_free=1) == ["a"]


def test_wake_at_zero_linger_is_arrival() -> None:
    b, clock = _batcher(linger_ms=0)
    clock.at_ms(7)
    b.add("a", mass=1000.0, budget_ms=100)
    assert b.wake_at() == 7_000_000


# ---------------------------------------------------------------- bounds


def test_max_queue_bound() -> None:
    b, _ = _batcher(max_batch=2, max_queue=3, linger_ms=50)
    assert [b.add(str(i), mass=1000.0 + i, budget_ms=1000) for i in range(3)] == [True, True, True]
    assert len(b) == 3
    for i in range(3, 10):
        assert b.add(str(i), mass=1000.0 + i, budget_ms=1000) is False
        assert len(b) == 3
    assert b.take(workers_free=1) == ["0", "1"]  # full (2): goes at once, the two nearest "0"
    assert len(b) == 1
    assert b.add("x", mass=1.0, budget_ms=1000) is True
    assert b.add("y", mass=1.0, budget_ms=1000) is True
    assert b.add("z", mass=1.0, budget_ms=1000) is False
    assert len(b) == 3
    assert sorted(b.drain()) == ["2", "x", "y"]


# ---------------------------------------------------------------- which spectra go


def test_mass_grouping_takes_urgent_and_its_mass_neighbours() -> None:
    # masses [1000, 2000, 1001, 3000, 1002, 999]; "u" (1000) has the earliest deadline (budget 10 < 50)
    # nearest 3 to 1000: 1000 itself, 999 and 1001 (1 Da each); 1002 is 2 Da away
    b, _ = _batcher(max_batch=3, max_queue=16, linger_ms=0)
    for name, mass, budget in [
        ("u", 1000.0, 10),
        ("b", 2000.0, 50),
        ("c", 1001.0, 50),
        ("d", 3000.0, 50),
        ("e", 1002.0, 50),
        ("f", 999.0, 50),
    ]:
        b.add(name, mass=mass, budget_ms=budget)
    assert b.take(workers_free=1) == ["f", "u", "c"]  # 999, 1000, 1001
    assert len(b) == 3
    # left: b (2000, deadline 50), d (3000, 50), e (1002, 50): all fit, by mass
    assert b.take(workers_free=1) == ["e", "b", "d"]
    assert len(b) == 0


def test_mass_grouping_urgent_not_first_arrival() -> None:
    # the urgent one arrives last; masses [500, 3000, 3001, 2999, 3002]; urgent = "z" (3002)
    # nearest 3 to 3002: 3002, 3001 (1 Da), 3000 (2 Da)
    b, _ = _batcher(max_batch=3, linger_ms=0)
    for name, mass, budget in [("a", 500.0, 50), ("b", 3000.0, 50), ("c", 3001.0, 50), ("d", 2999.0, 50)]:
        b.add(name, mass=mass, budget_ms=budget)
    b.add("z", mass=3002.0, budget_ms=5)
    assert b.take(workers_free=1) == ["b", "c", "z"]
    assert b.drain() == ["a", "d"]


def test_mass_grouping_nearest_not_rank_centred() -> None:
    # masses [100, 1000, 1001, 1002], urgent = 1000, max_batch 3:
    # the nearest three to 1000 are 1000, 1001, 1002 (0, 1, 2 Da), not 100 (900 Da away)
    b, _ = _batcher(max_batch=3, linger_ms=0)
    for name, mass, budget in [("far", 100.0, 50), ("u", 1000.0, 5), ("c", 1001.0, 50), ("d", 1002.0, 50)]:
        b.add(name, mass=mass, budget_ms=budget)
    assert b.take(workers_free=1) == ["u", "c", "d"]
    assert b.drain() == ["far"]


def test_mass_grouping_brute_force() -> None:
    # against a brute-force "the max_batch nearest in mass to the most urgent" on random queues
    rng = np.random.default_rng(11)
    for trial in range(200):
        n = int(rng.integers(2, 12))
        cap = int(rng.integers(1, n + 1))
        masses = rng.choice(np.arange(500, 700), size=n, replace=False).astype(float)  # distinct masses
        budgets = rng.permutation(n) + 10  # distinct deadlines
        b, _ = _batcher(max_batch=cap, max_queue=16, linger_ms=0)
        for i in range(n):
            b.add(i, mass=float(masses[i]), budget_ms=float(budgets[i]))
        got = b.take(workers_free=1)
        assert got is not None
        urgent = int(np.argmin(budgets))
        dist = np.abs(masses - masses[urgent])
        # the cap-th smallest distance bounds the chosen ones; ties at the boundary may go either way
        bound = np.sort(dist)[cap - 1]
        assert len(got) == cap, trial
        assert urgent in got, trial
        assert all(dist[i] <= bound for i in got), (trial, got)
        assert all(i in got for i in range(n) if dist[i] < bound), (trial, got)
        assert list(masses[got]) == sorted(masses[got])
        assert len(b) == n - cap
        assert sorted([*got, *b.drain()]) == list(range(n))


def test_drain_in_arrival_order() -> None:
    b, clock = _batcher(max_batch=4, linger_ms=50)
    for i, (name, mass) in enumerate([("a", 3000.0), ("b", 1000.0), ("c", 2000.0)]):
        clock.at_ms(i)
        b.add(name, mass=mass, budget_ms=100)
    assert b.drain() == ["a", "b", "c"]
    assert len(b) == 0
    assert b.drain() == []
    assert b.take(workers_free=1) is None
    assert b.wake_at() is None


def test_batcher_uses_the_fitted_model() -> None:
    # after fitting 0.002 + 1e-5 n, one spectrum with budget 20 ms at t = 0, margin 1 ms:
    #   predict(1) = 2.01 ms -> flush = 20 - 2.01 - 1 = 16.99 ms = 16_990_000 ns
    b, clock = _batcher(linger_ms=50, fixed_s=0.01, per_item_s=2e-5, margin_ms=1)
    for n in (1, 10, 100, 1000):
        b.model.observe(n, 0.002 + 1e-5 * n)
    b.add("a", mass=1000.0, budget_ms=20)
    flush = b.flush_at()
    assert flush is not None and abs(flush - 16_990_000) <= 1
    clock.ns = 16_980_000
    assert b.take(workers_free=1) is None
    clock.ns = 16_990_001
    assert b.take(workers_free=1) == ["a"]


def test_many_at_once_are_one_segment_and_the_queue_bound_cuts_the_tail() -> None:
    clock = FakeClock()
    b = MicroBatcher(BatchPolicy(max_batch=4, max_queue=6), EngineTimeModel(fixed_s=0.004, per_item_s=0.0), clock)
    got = b.add(np.arange(5), mass=np.array([900.0, 500, 700, 600, 800]), budget_ms=np.full(5, 50.0))
    assert got == 5 and len(b) == 5
    assert b.add(np.arange(10, 14), mass=np.full(4, 650.0), budget_ms=np.full(4, 50.0)) == 1  # one place left
    assert len(b) == 6
    # full: the 4 nearest in mass to the most urgent (all deadlines 50 ms: the first, 900), by mass
    assert b.take(workers_free=1).tolist() == [10, 2, 4, 0]
    assert b.drain().tolist() == [1, 3]  # the rest, in arrival order


# ---------------------------------------------------------------- overload decided on arrival
