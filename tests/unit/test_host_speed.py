"""The benches' host-speed line (`bench/host_speed.py`): its three figures, measured for real, briefly."""

from __future__ import annotations

from bench.host_speed import hop_us, measure


def test_the_three_figures_are_measured() -> None:
    m = measure(seconds=0.05, cores=2)
    assert set(m) == {"py_us", "py_all_ratio", "hop_us", "cores"} and m["cores"] == 2
    assert 0 < m["py_us"] < 1e6 and 0.1 < m["py_all_ratio"] < 100 and 0 < m["hop_us"] < 1e5


def test_a_process_hop_takes_a_round_trip_to_another_process() -> None:
    assert 0 < hop_us(50) < 1e5  # µs: a round trip cannot be free, nor take 0.1 s on any working host
