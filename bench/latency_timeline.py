"""Latency over a run's seconds (issue 21): a second subscriber to the daemon's results beside ``rt_load.py``, each
answer binned by when it came, to tell a run that is late throughout from one late for a moment (a stall at a run's
start or end, a lane falling behind) — ``rt_load.py`` gives a whole run's percentiles only.

Latency as ``rt_load.py`` takes it (this host's receive time less the echoed ``sent_ns``). Stops on SIGTERM or
SIGINT (or after ``--seconds``), then writes one JSON object: ``bin_ms`` and, per bin from the first answer, the
answers, of them ``shed``, and p50 / p99 / max latency in ms (``None`` where a bin has none).

    python bench/latency_timeline.py --results tcp://127.0.0.1:P --out timeline.json [--bin-ms 250] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import zmq

try:
    from orjson import loads
except ImportError:  # pragma: no cover
    from json import loads


def bins(at_ns: np.ndarray, latency_ms: np.ndarray, shed: np.ndarray, bin_ms: float) -> dict[str, Any]:
    """Per ``bin_ms`` from the first answer: answers, shed, and p50 / p99 / max latency (ms, 2 decimals)."""
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
    """This script beside a run, as a process (``bin_ms`` 0: none), for a ``with`` block; after it, ``result`` is
    ``{"timeline": …}`` (``{}`` without one, or when it wrote nothing)."""

    def __init__(self, results: str, bin_ms: float) -> None:
        self._out = Path(tempfile.mkdtemp()) / "timeline.json"
        self._proc = subprocess.Popen([sys.executable, __file__, "--results", results, "--out", str(self._out),
                                       "--bin-ms", str(bin_ms)]) if bin_ms else None  # fmt: skip
        self.result: dict[str, Any] = {}
        time.sleep(0.3 if bin_ms else 0.0)  # subscribed before the run's first answer

    def __enter__(self) -> Timeline:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(60)
            self.result = {"timeline": json.loads(self._out.read_text())} if self._out.exists() else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True, help="the daemon's results endpoint")
    ap.add_argument("--out", required=True, help="where the JSON goes")
    ap.add_argument("--bin-ms", type=float, default=250.0)
    ap.add_argument("--seconds", type=float, default=600.0, help="stop after this long at most")
    args = ap.parse_args()
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"result")
    sub.connect(args.results)
    at, sent, shed = [], [], []
    end = time.monotonic() + args.seconds
    while not stop and time.monotonic() < end:
        if not sub.poll(50):
            continue
        while True:
            try:
                frames = sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            now = time.time_ns()
            r = loads(frames[-1])
            if r.get("sent_ns"):
                at.append(now)
                sent.append(r["sent_ns"])
                shed.append(r.get("status") == "shed")
    a = np.array(at, np.int64)
    out = bins(a, (a - np.array(sent, np.int64)) / 1e6, np.array(shed, bool), args.bin_ms)
    with open(args.out, "w") as f:
        json.dump(out, f)
    sub.close(0)
    ctx.term()


if __name__ == "__main__":
    main()
