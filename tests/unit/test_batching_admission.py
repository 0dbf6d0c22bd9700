"""What the micro-batcher predicts and gives up (`rtsearch.serve.engine.batching`): when newcomers would be answered
(the admission's prediction: the engine's batches ahead, the answering tail once, the results thread's pace), and which
waiting spectra can no longer be answered in time. Golden times worked out by hand in the comments, on a fake clock
in ns.
"""

from __future__ import annotations

import pytest

from rtsearch.serve.engine.batching import MS
from tests.unit.named_batcher import batcher as _batcher


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
