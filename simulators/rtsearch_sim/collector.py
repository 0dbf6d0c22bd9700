"""Receiving results: a SUB socket on the daemon's result stream, measured independently of the daemon.

Both answer topics are collected: ``result`` and ``batch.results`` (the answers to spectra sent in batches).
Messages are only timestamped while they arrive (a background thread doing
``recv`` and ``time.time_ns()``); they are parsed afterwards, so the collector
keeps up with rates the daemon can. Latency is sent → received: the sender's
``sent_ns`` in the result against this process's clock at arrival (sender and
collector run on one machine).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import orjson
import zmq

from rtsearch.protocol.batch import BATCH_RESULTS, batch_results_count
from rtsearch.protocol.wire import RESULT


@dataclass
class Report:
    """What came back for what was sent."""

    sent: int
    answered: int
    lost: int
    duplicates: int
    unexpected: int
    by_status: dict[str, int]
    latency_ms: dict[str, float]
    seconds: float
    throughput: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        lat = self.latency_ms
        by = ", ".join(f"{k} {v:,}" for k, v in sorted(self.by_status.items()))
        return (
            f"sent {self.sent:,} MS2, answered {self.answered:,}, lost {self.lost:,} ({by}); latency ms "
            f"p50 {lat.get('p50', float('nan')):.2f} p90 {lat.get('p90', float('nan')):.2f} "
            f"p99 {lat.get('p99', float('nan')):.2f} max {lat.get('max', float('nan')):.2f}; "
            f"{self.throughput:,.0f} results/s"
        )


class Collector:
    """Subscribes to ``endpoint``; ``start()``, then `report` once sending is done."""

    def __init__(self, endpoint: str, *, ctx: zmq.Context[Any] | None = None) -> None:
        self.ctx = ctx or zmq.Context.instance()
        self.endpoint = endpoint
        self.raw: list[tuple[bytes, int]] = []  # result message bodies and when each arrived
        self.batches: list[tuple[bytes, int]] = []  # batch.results bodies (JSON arrays) and when each arrived
        self._n_batched = 0  # results in them
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="collector", daemon=True)
        self._ready = threading.Event()
        self.on_message: Any = None  # optional callback(dict) from the collector thread (demo printing)

    def start(self, settle_s: float = 0.3) -> Collector:
        self._thread.start()
        self._ready.wait(5)
        time.sleep(settle_s)  # let the subscription reach the daemon's PUB before anything is sent
        return self

    def _loop(self) -> None:
        sock = self.ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.SUBSCRIBE, RESULT)
        sock.setsockopt(zmq.SUBSCRIBE, BATCH_RESULTS)
        sock.connect(self.endpoint)
        self._ready.set()
        raw, batches = self.raw, self.batches
        try:
            while not self._stop.is_set():
                if not sock.poll(50):
                    continue
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    if frames[0] == BATCH_RESULTS:
                        batches.append((frames[2], time.time_ns()))
                        self._n_batched += batch_results_count(frames)  # from the header: the body is parsed later
                        continue
                    raw.append((frames[1], time.time_ns()))
                    if self.on_message is not None:
                        self.on_message(orjson.loads(frames[1]))
        finally:
            sock.close(linger=0)

    def count(self) -> int:
        return len(self.raw) + self._n_batched

    def wait(self, expected: int, *, idle_s: float = 5.0, timeout_s: float = 600.0) -> None:
        """Until ``expected`` results arrived, or none for ``idle_s``, or ``timeout_s`` passed."""
        t_end = time.monotonic() + timeout_s
        last, last_change = -1, time.monotonic()
        while self.count() < expected and time.monotonic() < t_end:
            n = self.count()
            if n != last:
                last, last_change = n, time.monotonic()
            elif time.monotonic() - last_change > idle_s:
                break
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def results(self) -> list[dict[str, Any]]:
        out = []
        for body, t in list(self.raw):
            r = orjson.loads(body)
            r["collected_ns"] = t
            out.append(r)
        for body, t in list(self.batches):
            for r in orjson.loads(body):
                r["collected_ns"] = t
                out.append(r)
        return out

    def report(self, sent: Sequence[tuple[str, int]], *, first_ns: int = 0) -> Report:
        """Compare the results against the MS2 keys that were sent."""
        results = self.results()
        expected = set(sent)
        seen: dict[tuple[str, int], int] = {}
        lat: list[float] = []
        by_status: dict[str, int] = {}
        unexpected = 0
        for r in results:
            key = (r.get("run"), r.get("scan"))
            if key not in expected:
                unexpected += 1
                continue
            seen[key] = seen.get(key, 0) + 1
            if seen[key] == 1:
                by_status[r["status"]] = by_status.get(r["status"], 0) + 1
                if r.get("sent_ns"):
                    lat.append((r["collected_ns"] - r["sent_ns"]) / 1e6)
        answered = len(seen)
        dup = sum(v - 1 for v in seen.values())
        a = np.array(lat) if lat else np.zeros(0)
        lat_ms = (
            {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
             "p99": float(np.percentile(a, 99)), "max": float(a.max()), "mean": float(a.mean())}
            if a.size else {}
        )  # fmt: skip
        t0 = first_ns or (min((r["sent_ns"] for r in results if r.get("sent_ns")), default=0))
        t1 = max((r["collected_ns"] for r in results), default=t0)
        secs = max((t1 - t0) / 1e9, 1e-9) if results else 0.0
        return Report(
            sent=len(expected), answered=answered, lost=len(expected) - answered, duplicates=dup,
            unexpected=unexpected, by_status=by_status, latency_ms=lat_ms, seconds=secs,
            throughput=answered / secs if secs else 0.0,
        )  # fmt: skip
