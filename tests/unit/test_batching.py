"""Tests for the micro-batcher (`rtsearch.serve.batching`), driven by a fake clock in ns.

Golden times are worked out by hand in the comments: a spectrum added at
``t`` with budget ``b`` ms has its deadline at ``t + b``; the deadline rule
flushes at ``deadline - predict(n) - margin``; `wake_at` is the earlier of
that and ``oldest arrival + linger``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rtsearch.serve.batching import MS, BatchPolicy, EngineTimeModel, MicroBatcher, expiry_slack_ms
from tests.fakeclock import FakeClock


class Named:
    """The batcher with the tests' names for its integer handles: one spectrum added at a time."""

    def __init__(self, batcher: MicroBatcher) -> None:
        self.b, self.names = batcher, []
        self.model = batcher.model

    def add(self, name: Any, *, mass: float, budget_ms: float, arrived_ns: int | None = None) -> bool:
        self.names.append(name)
        handle = np.array([len(self.names) - 1])
        return self.b.add(handle, mass=np.array([mass]), budget_ms=np.array([float(budget_ms)]),
                          arrived_ns=None if arrived_ns is None else np.array([arrived_ns])) == 1  # fmt: skip

    def _named(self, handles: np.ndarray | None) -> list[Any] | None:
        return None if handles is None else [self.names[h] for h in handles.tolist()]

    def take(self, **kw: Any) -> list[Any] | None:
        return self._named(self.b.take(**kw))

    def drain(self) -> list[Any]:
        return self._named(self.b.drain()) or []

    def __len__(self) -> int:
        return len(self.b)

    def flush_at(self) -> int | None:
        return self.b.flush_at()

    def wake_at(self) -> int | None:
        return self.b.wake_at()


def _batcher(
    *,
    max_batch: int = 8,
    max_queue: int = 64,
    linger_ms: float = 0.0,
    margin_ms: float = 1.0,
    fixed_s: float = 0.004,
    per_item_s: float = 0.0,
) -> tuple[Named, FakeClock]:
    clock = FakeClock()
    policy = BatchPolicy(max_batch=max_batch, max_queue=max_queue, linger_ms=linger_ms, margin_ms=margin_ms)
    return Named(MicroBatcher(policy, EngineTimeModel(fixed_s=fixed_s, per_item_s=per_item_s), clock)), clock


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


def test_predicted_done_counts_the_batch_in_flight_the_waiting_and_those_ahead() -> None:
    # fixed 4 ms, 1 ms a spectrum, batches of at most 3; 2 already waiting; the engine is busy until t = 10 ms
    b, clock = _batcher(max_batch=3, fixed_s=0.004, per_item_s=0.001)
    b.add("w1", mass=500.0, budget_ms=1000)
    b.add("w2", mass=600.0, budget_ms=1000)
    clock.at_ms(2)
    done = b.b.predicted_done(4, busy_until_ns=10 * MS)
    # newcomers are spectra 3..6: batches through them 1, 2, 2, 2 -> 10 + 4*b + 1*through ms
    assert (done / MS).tolist() == [10 + 4 + 3, 10 + 8 + 4, 10 + 8 + 5, 10 + 8 + 6]
    assert (b.b.predicted_done(1, busy_until_ns=0) / MS).tolist() == [2 + 4 + 3]  # engine free: from now
    # the last newcomer's alone, in plain arithmetic, is the array's last (what the admission asks first)
    for n, busy in ((4, 10 * MS), (1, 0), (7, 3 * MS)):
        assert b.b.predicted_last(n, busy_until_ns=busy) == int(b.b.predicted_done(n, busy_until_ns=busy)[-1])


def test_answering_a_batch_is_paid_once_by_a_newcomer_not_by_each_batch_ahead() -> None:
    # the engine: fixed 4 ms, 1 ms a spectrum, batches of 3; answering a scored batch (the tail): 5 ms + 0.5 ms a
    # spectrum, beside the engine's next batch. Engine busy until 10 ms, 2 waiting, 4 newcomers:
    b, clock = _batcher(max_batch=3, fixed_s=0.004, per_item_s=0.001)
    b.b.tail.fixed_s, b.b.tail.per_item_s = 0.005, 0.0005
    b.add("w1", mass=500.0, budget_ms=1000)
    b.add("w2", mass=600.0, budget_ms=1000)
    done = b.b.predicted_done(4, busy_until_ns=10 * MS)
    # as without the tail (10 + 4*batches + through) plus its own batch's tail, 5 + 0.5 * min(through, 3):
    # through 3: 17 + 6.5; 4: 22 + 6.5; 5: 23 + 6.5; 6: 24 + 6.5 (each batch ahead charged the engine's time only)
    assert (done / MS).tolist() == [23.5, 28.5, 29.5, 30.5]
    assert b.b.answer_s(3) == pytest.approx(0.004 + 0.003 + 0.005 + 0.0015)
    # given up a whole answer before the deadline: a batch of one on the engine and its tail, the margin, the slack
    assert b.b.lead_ns() == int((0.005 + 0.0055 + (1.0 + b.b.policy.slack_ms) / 1e3) * 1e9)


def test_where_answering_is_the_slower_stage_it_paces_the_batches_ahead() -> None:
    # the engine: 4 ms a batch (batches of 3); the results thread 6 ms a batch of its own, 0.5 ms a spectrum: with
    # 2 waiting and the engine free now, newcomer 4 (two batches through it) waits max(2 x 4, 2 x 6 + 4 x 0.5) = 14 ms
    b, clock = _batcher(max_batch=3, fixed_s=0.004, per_item_s=0.0)
    b.b.answering.fixed_s, b.b.answering.per_item_s = 0.006, 0.0005
    b.add("w1", mass=500.0, budget_ms=1000)
    b.add("w2", mass=600.0, budget_ms=1000)
    assert (b.b.predicted_done(2, busy_until_ns=0) / MS).tolist() == [max(4, 6 + 1.5), max(8, 12 + 2.0)]
    b.b.answering.fixed_s = 0.001  # the engine slower: it paces them (1 + 1.5 < 4; 2 + 2 < 8)
    assert (b.b.predicted_done(2, busy_until_ns=0) / MS).tolist() == [4, 8]


def test_what_the_next_batch_would_answer_late_is_given_up_before_it_is_taken() -> None:
    # engine 4 ms + 1 ms a spectrum, tail 2 ms, margin 1 ms; three wait, deadlines 30, 36, 60 ms
    b, clock = _batcher(max_batch=8, fixed_s=0.004, per_item_s=0.001, margin_ms=1.0)
    b.b.tail.fixed_s = 0.002
    b.add("a", mass=500.0, budget_ms=30)
    b.add("b", mass=600.0, budget_ms=36)
    b.add("c", mass=700.0, budget_ms=60)
    # a batch of the three starting at 20 ms (its worker busy until then) is answered at 20 + 4 + 3 + 2 = 29 ms,
    # +1 margin = 30: "a" (due at 30) would be late by the margin rule (deadline < 30 is false: kept)
    assert b.b.give_up_late(20 * MS).tolist() == []
    # starting at 26 ms: the three answered at 35, 36 with the margin: "a" (30) goes; then the two at 26 + 8 + 1 = 35,
    # "b" (36) in time: it stays (the fewest given up: not every deadline before 36)
    assert [b.names[h] for h in b.b.give_up_late(26 * MS).tolist()] == ["a"]
    # "d" due at 40 ms; starting at 30 ms the three ("b" 36, "d" 40, "c" 60) are answered at 30 + 7 + 2 + 1 = 40:
    # "b" goes; "d" and "c" at 30 + 6 + 2 + 1 = 39, in time for 40
    b.add("d", mass=800.0, budget_ms=40)
    assert [b.names[h] for h in b.b.give_up_late(30 * MS).tolist()] == ["b"]
    assert b.take(workers_free=1, now=True) == ["c", "d"]
    assert b.b.give_up_late(0).tolist() == []  # nothing waits


def test_expire_takes_out_only_those_past_their_deadline() -> None:
    b, clock = _batcher()
    b.add("a", mass=500.0, budget_ms=10)  # deadline 10 ms
    b.add("b", mass=600.0, budget_ms=50)  # deadline 50 ms
    clock.at_ms(5)
    b.add("c", mass=700.0, budget_ms=3)  # deadline 8 ms
    assert b._named(b.b.expire(8 * MS)) == []  # deadlines not passed yet (8 is not before 8)
    assert b._named(b.b.expire(11 * MS)) == ["a", "c"]
    assert len(b) == 1 and b.take(workers_free=1, now=True) == ["b"]
    assert b._named(b.b.expire(100 * MS)) == []
