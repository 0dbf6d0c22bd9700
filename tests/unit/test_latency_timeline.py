"""A run's answers binned by when they came (`bench.latency_timeline.bins`): golden values by hand."""

from __future__ import annotations

import numpy as np

from bench.latency_timeline import bins


def test_answers_fall_in_the_bin_of_when_they_came():
    # answers at 0, 100, 300 and 310 ms after the first: bins of 250 ms hold two each; the second was shed
    at = np.array([0, 100, 300, 310], np.int64) * 1_000_000 + 5_000_000_000
    got = bins(at, np.array([1.0, 3.0, 10.0, 20.0]), np.array([False, True, False, False]), 250.0)
    assert got["n"] == [2, 2] and got["shed"] == [1, 0]
    assert got["p50"] == [2.0, 15.0] and got["max"] == [3.0, 20.0]
    assert got["p99"] == [2.98, 19.9]  # numpy's linear interpolation: 1 + 0.99 × 2, 10 + 0.99 × 10


def test_a_gap_leaves_an_empty_bin_and_no_answers_no_bins():
    at = np.array([0, 600], np.int64) * 1_000_000
    got = bins(at, np.array([5.0, 7.0]), np.zeros(2, bool), 250.0)
    assert got["n"] == [1, 0, 1] and got["p50"] == [5.0, None, 7.0]
    assert bins(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool), 250.0)["n"] == []
