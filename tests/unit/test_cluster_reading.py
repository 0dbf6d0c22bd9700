"""The scale-out bench's capacity search (`bench.cluster_reading.refined_rate`): golden values by hand."""

from __future__ import annotations

from bench.cluster_reading import refined_rate


def test_the_next_rate_is_halfway_between_the_best_pass_and_the_next_failure():
    # 7,000 passed, 10,000 and 13,000 failed: halfway between 7,000 and 10,000
    assert refined_rate([(7000, True), (10000, False), (13000, False)]) == 8500
    # then 8,500 failed: halfway between 7,000 and 8,500 is 7,750, rounded to 7,800 (to 100 /s)
    assert refined_rate([(7000, True), (10000, False), (8500, False)]) == 7800
    # a failure below the best pass does not bound it (a noisy rate): 13,000 passed after 10,000 failed
    assert refined_rate([(7000, True), (10000, False), (13000, True), (16000, False)]) == 14500


def test_no_next_rate_without_a_pass_a_failure_above_it_or_room():
    assert refined_rate([]) is None
    assert refined_rate([(7000, False), (10000, False)]) is None  # nothing passed
    assert refined_rate([(7000, True), (10000, True)]) is None  # nothing above failed: the grid's top rate
    assert refined_rate([(7000, True), (7900, False)]) is None  # within 1,000 /s
    assert refined_rate([(7000, True), (7900, False)], finest=500) == 7400  # (7,450 rounds to even: 7,400)
