"""How fast this host runs the daemon's kind of work right now: one line to set beside a call's figures.

The same code's p99 at 100,000 /s has ranged from ~58 ms to over a second between device calls (bench/RESULTS.md,
2026-11-29): the calls land on different hosts, or on one busier at times. This times, in a few seconds, what the
daemon's processes mostly do — small-object Python (dicts, lists, tuples: the per-message decode) and a process
hop (a Unix socket pair's ping-pong, the hand-overs between intake, lane and engine processes) — one process alone,
then one a core at once, so calls can be compared by their host before their daemons are:

- ``py_us``: µs of one round of the small-object loop in one process (lower: a faster core);
- ``py_all_ratio``: the same loop's µs a round with a process on every core at once, over the lone one (1.0: the
  cores are the host's own; above: shared, or slowed when all are busy);
- ``hop_us``: the median round trip between two processes over a Unix socket pair (µs; the wake-ups a hand-over costs).

    python bench/host_speed.py [--seconds 1.0] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import sys
import time


def _rounds(seconds: float) -> float:
    """µs a round of the small-object loop, run for about ``seconds``."""
    n, t_end, t0 = 0, time.perf_counter() + seconds, time.perf_counter()
    while time.perf_counter() < t_end:
        d: dict[int, tuple[int, str]] = {}
        for i in range(200):
            d[i & 63] = (i, "x")
            _ = [v for v in d.values() if v[0] & 1]
        n += 1
    return (time.perf_counter() - t0) / n * 1e6


def _rounds_into(seconds: float, out: object) -> None:
    out.put(_rounds(seconds))  # type: ignore[attr-defined]


def _echo(conn: socket.socket, other: socket.socket) -> None:
    other.close()  # the parent's end, inherited: closed here so that the parent's close ends this loop
    while data := conn.recv(64):
        conn.sendall(data)


def hop_us(n: int = 2000) -> float:
    """Median µs of a 1-byte round trip to another process over a Unix socket pair."""
    ours, theirs = socket.socketpair()
    proc = multiprocessing.get_context("fork").Process(target=_echo, args=(theirs, ours), daemon=True)
    proc.start()
    theirs.close()
    trips = []
    for _ in range(n):
        t0 = time.perf_counter()
        ours.sendall(b"x")
        ours.recv(64)
        trips.append(time.perf_counter() - t0)
    ours.close()
    proc.join(5)
    return statistics.median(trips) * 1e6


def measure(seconds: float = 1.0, cores: int | None = None) -> dict[str, float]:
    """The three figures of the module docstring."""
    cores = cores or os.cpu_count() or 1
    alone = statistics.median(_rounds(seconds) for _ in range(3))  # a lone process's pace wanders: three looks
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_rounds_into, args=(seconds, q)) for _ in range(cores)]
    for p in procs:
        p.start()
    together = [q.get(timeout=60 + 10 * seconds) for _ in procs]
    for p in procs:
        p.join(10)
    return {"py_us": round(alone, 2), "py_all_ratio": round(statistics.median(together) / alone, 3),
            "hop_us": round(hop_us(), 1), "cores": cores}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=1.0, help="each timing's length")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of words")
    args = ap.parse_args()
    m = measure(args.seconds)
    if args.json:
        print(json.dumps({"host_speed": m}))
    else:
        print(f"host speed: small-object Python {m['py_us']} µs a round alone, x{m['py_all_ratio']} with all "
              f"{m['cores']} cores busy; a process hop's round trip {m['hop_us']} µs (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
