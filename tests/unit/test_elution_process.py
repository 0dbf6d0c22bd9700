"""The elution tracker's process (`rtsearch.serve.outputs.elution_process`): items applied in order with a run's
consecutive scans at once, a bad item skipped, and a round trip through the spawned child."""

from __future__ import annotations

import math

import numpy as np

from rtsearch.serve.outputs.elution_process import TrackerProcess, apply
from rtsearch.signal.live import ElutionTracker


def _scan(rt: float) -> tuple[str, str, float, np.ndarray, np.ndarray]:
    v = 1e6 * math.exp(-0.5 * ((rt - 60.0) / 5.0) ** 2) + 10.0
    return ("scan", "r", rt, np.array([300.0, 500.2701, 800.0]), np.array([50.0, v, 50.0]))


def _items() -> list[tuple[object, ...]]:
    times = [float(t) for t in np.arange(0.0, 150.0, 1.5)]
    bad = ("watch", "r", np.array([1, 2]), np.array([612.3]), np.array([2]), np.array([44.0]))  # unequal lengths
    watch = ("watch", "r", np.array([7]), np.array([500.2702]), np.array([2]), np.array([44.0]))
    return [*(_scan(t) for t in times[:30]), bad, watch, *(_scan(t) for t in times[30:]), ("end", "r")]


def test_items_apply_in_order_and_a_bad_one_is_skipped() -> None:
    tracker = ElutionTracker()
    events = apply(tracker, _items())
    assert [(e.scan, e.kind, e.apex_rt) for e in events] == [(7, "apex", 60.0), (7, "end", 60.0)]
    assert "r" not in tracker.runs  # the run's end forgot it


def test_the_process_returns_what_the_tracker_returns() -> None:
    items = _items()
    with TrackerProcess("numpy") as proc:
        proc.send(items[:31])
        assert proc.receive() == ([], 0)  # the bad watch skipped, nothing followed yet
        proc.send(items[31:-1])
        events, followed = proc.receive()
        proc.send(items[-1:])
        last, _ = proc.receive()
    assert followed == 0 and [e.kind for e in events + last] == ["apex", "end"]
