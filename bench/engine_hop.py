"""A lone spectrum through the engine, hop by hop: why the daemon's engine stage for a batch of one (2.3–2.7 ms on
the H200 hosts under rt_load.py at 200 /s, bench/RESULTS.md 2026-11-29) is two to three times the engine alone.

Each variant scores ``--count`` single-spectrum batches of the bench's spectra against the 20,000-protein bench
index, as the daemon's engine process does (`rtsearch.serve.engine_process.score_named`: scored, then named), and
prints the median, p90 and p99 of each batch's wall (ms):

- ``alone``: in this thread, back to back (the engine's own time, nothing idle);
- ``paced``: in this thread, one every ``1 / --hz`` s (the thread sleeps between, as an engine process does at a
  lane's share of 200 /s);
- ``echo``: an `rtsearch.serve.pipes.Channel` round trip of the same batch to a process that sends back a reply
  of the size a scored batch has, paced (the hop alone: pickling and two wake-ups);
- ``process``: `EngineProcess.score`, paced (the hop and the engine);
- ``process x4``: four engine processes, each paced from a thread of its own at ``--hz`` (four lanes).

(A spin-then-block on both ends of the engine pipe, polling it for 3 ms before blocking, was measured with this and
made no difference: 2.65 → 2.77 ms through one process, bench/RESULTS.md 2026-11-29; it was removed.)

    python bench/engine_hop.py --data ../shared/data --index-cache .benchcache/idx20k [--hz 50] [--count 400]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulators"))

from bench.latency_probe import pct  # noqa: E402
from bench.stream_bench import RUNS, get_index  # noqa: E402
from rtsearch.batch import SpectraBatch  # noqa: E402
from rtsearch.config import SearchConfig  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.search.database import DatabaseTarget  # noqa: E402
from rtsearch.serve.engine_process import EngineProcess, score_named  # noqa: E402
from rtsearch.serve.pipes import Channel  # noqa: E402
from rtsearch_sim.replay import load_run  # noqa: E402


def stats(ms: list[float]) -> dict[str, float]:
    """p50 / p90 / p99 / max of ``ms`` (`bench.latency_probe.pct`) and how many."""
    return pct(np.asarray(ms)) | {"n": len(ms)}


def paced(call: Any, batches: list[SpectraBatch], hz: float) -> list[float]:
    """``call(batch)`` for each batch, one every ``1 / hz`` s (``hz`` 0: back to back); ms each."""
    out, period, t_next = [], 1.0 / hz if hz else 0.0, time.perf_counter()
    for b in batches:
        if period:
            t_next += period
            time.sleep(max(0.0, t_next - time.perf_counter()))
        t0 = time.perf_counter()
        call(b)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _echo(conn: Connection, reply_bytes: int) -> None:
    channel = Channel(conn)
    reply = np.zeros(reply_bytes, np.uint8)
    while True:
        try:
            channel.recv()
        except (EOFError, OSError):
            return
        channel.send(("scored", reply))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--index-cache", type=Path)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--hz", type=float, default=50.0, help="a paced variant's batches a second (a lane's share)")
    ap.add_argument("--count", type=int, default=400, help="batches a variant")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    backend = get_backend(args.backend)
    index, _ = get_index(args.data, 20_000, args.index_cache, backend.xp)
    target = DatabaseTarget(index, SearchConfig(), backend)
    pool = [s for r in RUNS for s in load_run(args.data / r) if s.ms_level == 2]
    rng = np.random.default_rng(1)
    batches = [SpectraBatch.of([pool[i]]) for i in rng.integers(0, len(pool), args.count)]
    for b in batches[:50]:  # compiles and the pool's first allocations
        score_named(target, b)
    out: dict[str, Any] = {"backend": backend.name, "hz": args.hz}
    out["alone"] = stats(paced(lambda b: score_named(target, b), batches, 0))
    out["paced"] = stats(paced(lambda b: score_named(target, b), batches, args.hz))
    reply = len(__import__("pickle").dumps(score_named(target, batches[0])))
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=_echo, args=(theirs, reply), daemon=True)
    proc.start()
    theirs.close()
    echo = Channel(ours)

    def round_trip(b: SpectraBatch) -> None:
        echo.send(b)
        echo.recv()

    paced(round_trip, batches[:20], 0)
    out["echo"] = stats(paced(round_trip, batches, args.hz))
    echo.close()
    proc.join(5)
    reopen = target.reopen(backend.name)
    assert reopen is not None, "the bench index has no folder (--index-cache)"
    engines = [EngineProcess(reopen, f"hop{k}").start() for k in range(4)]
    for e in engines:
        paced(e.score, batches[:50], 0)
    out["process"] = stats(paced(engines[0].score, batches, args.hz))
    results: list[list[float]] = [[] for _ in engines]
    threads = [threading.Thread(target=lambda r=r, e=e: r.extend(paced(e.score, batches, args.hz)))
               for r, e in zip(results, engines, strict=True)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["process x4"] = stats([x for r in results for x in r])
    for e in engines:
        e.close()
    for k, v in out.items():
        print(f"{k:>18}: {v}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
