"""A second, lighter subscriber to a daemon's results: is an answer's latency added in the daemon or the client?

``rt_load.py``'s collector is one Python process that decodes every result whole (JSON) and books it; at 100,000
answers a second it may fall behind, and its latencies then include its own queue. This tap subscribes beside it
(its own process and ZeroMQ context), decodes only every ``--every``-th result and stamps its receipt: its
``sent → tap`` latency is the daemon's and the network's alone, and ``published → tap`` the way from the daemon's
publishing stamp (``published_ns``) out. Runs until SIGTERM, then writes ``(received, sent, published)`` wall-clock
ns as int64 rows (``.npy``) for `tap_latency`.

    python bench/results_tap.py tcp://127.0.0.1:5556 tap.npy [--every 16]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import zmq


def tap_latency(path: Path, start_s: float, end_s: float) -> dict[str, float]:
    """p50 / p99 ms of sent → tap and published → tap over the rows received in ``[start_s, end_s]`` (wall s)."""
    rows = np.load(path) if path.is_file() else np.zeros((0, 3), np.int64)
    keep = (rows[:, 0] >= start_s * 1e9) & (rows[:, 0] <= end_s * 1e9) if len(rows) else np.zeros(0, bool)
    rows = rows[keep]
    out: dict[str, float] = {"n": int(len(rows))}
    for name, col in (("sent", 1), ("published", 2)):
        ok = rows[:, col] > 0
        ms = (rows[ok, 0] - rows[ok, col]) / 1e6
        if len(ms):
            out[f"{name}_p50"], out[f"{name}_p99"] = (round(float(np.percentile(ms, q)), 3) for q in (50, 99))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="the daemon's results endpoint (PUB)")
    ap.add_argument("out", type=Path)
    ap.add_argument("--every", type=int, default=16, help="decode one result in this many")
    args = ap.parse_args()
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"result")
    sub.connect(args.results)
    rows: list[tuple[int, int, int]] = []
    n, every, recv, wall = 0, args.every, sub.recv_multipart, time.time_ns
    while not stop:
        if not sub.poll(50):
            continue
        while True:
            try:
                frames = recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            n += 1
            if n % every == 0 and frames[0] == b"result":
                now = wall()
                r = orjson.loads(frames[-1])
                rows.append((now, int(r.get("sent_ns") or 0), int(r.get("published_ns") or 0)))
    np.save(args.out, np.array(rows, dtype=np.int64).reshape(-1, 3))
    sub.close(0)
    ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
