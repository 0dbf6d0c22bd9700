"""Latency over a run's seconds (issue 21): the simulator's result collector (`rtsearch_sim.collector.Collector`)
beside ``rt_load.py``, each answer binned by when it came, to tell a run that is late throughout from one late for a
moment (a stall at a run's start or end, a lane falling behind) — ``rt_load.py`` gives a whole run's percentiles
only. Latency as ``rt_load.py`` takes it: this host's receive time less the echoed ``sent_ns``.

    with Timeline(results_endpoint, bin_ms=250) as timeline:
        ...  # the run
    timeline.result  # {"timeline": {"bin_ms", "n", "shed", "p50", "p99", "max"}}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rtsearch_sim.collector import Collector


def bins(at_ns: np.ndarray, latency_ms: np.ndarray, shed: np.ndarray, bin_ms: float) -> dict[str, Any]:
    """Per ``bin_ms`` from the first answer: answers, shed, and p50 / p99 / max latency (ms, 2 decimals; ``None``
    where a bin has none)."""
    if not at_ns.size:
        return {"bin_ms": bin_ms, "n": [], "shed": [], "p50": [], "p99": [], "max": []}
    k = ((at_ns - at_ns.min()) / (bin_ms * 1e6)).astype(np.int64)
    out: dict[str, Any] = {"bin_ms": bin_ms, "n": np.bincount(k).tolist(),
                           "shed": np.bincount(k, weights=shed).astype(int).tolist()}  # fmt: skip
    for name, q in (("p50", 50), ("p99", 99), ("max", 100)):
        out[name] = [round(float(np.percentile(latency_ms[k == b], q)), 2) if (k == b).any() else None
                     for b in range(int(k.max()) + 1)]  # fmt: skip
    return out


class Timeline:
    """A collector on ``results`` for a ``with`` block (``bin_ms`` 0: none); after it, ``result`` is
    ``{"timeline": …}`` (`bins` of what came), or ``{}`` without one."""

    def __init__(self, results: str, bin_ms: float) -> None:
        self.bin_ms, self.result = bin_ms, {}
        self._collector = Collector(results) if bin_ms else None

    def __enter__(self) -> Timeline:
        if self._collector is not None:
            self._collector.start()  # subscribed before the run's first answer
        return self

    def __exit__(self, *exc: object) -> None:
        if self._collector is None:
            return
        self._collector.stop()
        got = [r for r in self._collector.results() if r.get("sent_ns")]
        at = np.array([r["collected_ns"] for r in got], np.int64)
        latency = (at - np.array([r["sent_ns"] for r in got], np.int64)) / 1e6
        self.result = {"timeline": bins(at, latency, np.array([r.get("status") == "shed" for r in got], bool),
                                        self.bin_ms)}  # fmt: skip
