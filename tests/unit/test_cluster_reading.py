"""The scale-out bench's readings (`bench.cluster_reading`): the capacity search (`refined_rate`) and each worker
process's busy fraction (`busy_by_process`) and mean round (`round_sizes`), the host's busy share (`host_busy`),
golden values by hand."""

from __future__ import annotations

from bench.cluster_reading import busy_by_process, host_busy, host_cpu, python_speed, refined_rate, round_sizes


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


def test_a_worker_the_lanes_share_is_as_busy_as_its_lanes_shares_together():
    # four lanes sharing w0 and w1 (each one process: its pid logged by every lane, kept once), each lane's door
    # counting its own spectra's share of the merged batches: w0 0.22 + 0.21 + 0.23 + 0.22 = 0.88
    busy = {"w0.0": 0.22, "w1.0": 0.2, "w0.1": 0.21, "w1.1": 0.19, "w0.2": 0.23, "w1.2": 0.2, "w0.3": 0.22, "w1.3": 0.2}
    assert busy_by_process(busy, {"w0": 101, "w1": 102}) == {"w0": 0.88, "w1": 0.79}


def test_a_lanes_own_workers_stay_apart():
    # two lanes, each its own w0 (two processes: w0 and w0.1 in the log's order): each as its door read it
    busy = {"w0.0": 0.95, "w0.1": 0.93}
    assert busy_by_process(busy, {"w0": 101, "w0.1": 202}) == {"w0.0": 0.95, "w0.1": 0.93}
    assert busy_by_process({"w0.0": 0.5}, {"w0": 101}) == {"w0": 0.5}  # one lane, one worker


def test_the_hosts_busy_share_between_two_readings():
    # 50 busy ticks of 100 between the readings: half; nothing elapsed: unknown
    assert host_busy((100, 1000), (150, 1100)) == 0.5
    assert host_busy((100, 1000), (100, 1000)) is None
    busy, total = host_cpu()  # this machine's /proc/stat: busy ticks never exceed the total
    assert total > 0 and 0 <= busy <= total


def test_a_shared_workers_mean_round_counts_every_lanes_spectra_and_rounds():
    # w0 shared by two lanes: (300 + 100) spectra in (4 + 4) rounds: 50 a round; two lanes' own w0: each its own
    assert round_sizes({"w0.0": 300, "w0.1": 100}, {"w0.0": 4.0, "w0.1": 4.0}, {"w0": 1}) == {"w0": 50.0}
    assert round_sizes({"w0.0": 300, "w0.1": 100}, {"w0.0": 4.0, "w0.1": 4.0}, {"w0": 1, "w0.1": 2}) == \
        {"w0.0": 75.0, "w0.1": 25.0}  # fmt: skip
    assert round_sizes({"w0.0": 10}, {}, {"w0": 1}) == {}  # no round counted (an older daemon): none


def test_the_hosts_python_speed_is_read_from_host_txt_and_a_slow_one_marked():
    # host.txt as bench/cluster_call.sh writes it: the loop's line, then machine_stalls.py's
    fast = "host loop s 0.672729014999998\ncpu   0: median 0.834 ms p99 1.172 max 3.27; 0 slow\n"
    assert python_speed(fast) == "host: one-core Python loop 0.67 s"
    slow = "host: one-core Python loop 1.04 s (slow: lanes saturate sooner)"
    assert python_speed("host loop s 1.0418020769999998\n") == slow
    assert python_speed("") is None and python_speed("cpu 0: median 0.8 ms\n") is None
