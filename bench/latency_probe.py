"""Where a lone spectrum's latency goes at a low rate: sender → intake → answer → collector, stage by stage.

Sends the dev runs' MS2 spectra one message each at ``--rate`` (default 200/s) to the echo floor
(``echo_floor.py``, a Python service that answers at once) and to ``rtsearch serve`` with each
``--variant``, collecting every answer in-process (`rtsearch_sim`). Each rtsearch answer carries three
wall-clock stamps, so its latency splits into: sent → received (the sockets and the intake process),
received → published (the daemon: handing over, batching, scoring, results, encoding), published →
collected (the results proxy, the PUB, the subscriber). The daemon's own histograms add the mean wait
before a batch was taken and the engine's mean time per batch over the phase.

    python3 bench/latency_probe.py --data .gpudata/data --tools .gpudata/tools \\
        --index-cache .benchcache/idx20k --variant k1=--intakes,1 --json out.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from bench.serving import Served, cpu_by_thread, free_port, index_and_record  # noqa: E402
from bench.stream_bench import RUNS  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch_sim.collector import Collector  # noqa: E402
from rtsearch_sim.replay import Sender, Sent, replay  # noqa: E402

HISTOGRAMS = ("rtsearch_queue_wait_seconds", "rtsearch_engine_batch_seconds", "rtsearch_batch_size")


def pct(a: np.ndarray) -> dict[str, float]:
    if not a.size:
        return {}
    return {k: round(float(np.percentile(a, q)), 3) for k, q in (("p50", 50), ("p90", 90), ("p99", 99))} | {
        "max": round(float(a.max()), 3)}


def histograms(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        for h in HISTOGRAMS:
            if line.startswith((f"{h}_sum", f"{h}_count")):
                key, value = line.rsplit(" ", 1)
                out[key] = float(value)
    return out


def send(spectra_ep: str, results_ep: str, spectra: list[Any], rate: float, run: str) -> dict[str, Any]:
    col = Collector(results_ep).start()
    sent = Sent()
    with Sender(spectra_ep, mode="push", wait_s=20) as s:
        replay(s, [(run, spectra)], speed=None, rate=rate, sent=sent)
    col.wait(len(sent.ms2), idle_s=10, timeout_s=120)
    col.stop()
    res = [r for r in col.results() if r.get("run") == run]
    out: dict[str, Any] = {"sent": len(sent.ms2), "answered": len({r["scan"] for r in res})}
    total = np.array([(r["collected_ns"] - r["sent_ns"]) / 1e6 for r in res if r.get("sent_ns")])
    out["sent_to_collected_ms"] = pct(total)
    if res and "received_ns" in res[0]:
        for name, a, b in (("sent_to_received_ms", "sent_ns", "received_ns"),
                           ("received_to_published_ms", "received_ns", "published_ns"),
                           ("published_to_collected_ms", "published_ns", "collected_ns")):  # fmt: skip
            out[name] = pct(np.array([(r[b] - r[a]) / 1e6 for r in res if r.get(a) and r.get(b)]))
    return out


def engine_alone(index: Any, backend: Any, spectra: list[Any], sizes: list[int]) -> dict[str, dict[str, float]]:
    """``Engine.score`` in this process, nothing else running: wall and this thread's CPU ms per batch of each
    size (the CPU part is the host's Python and launches, the rest the GPU and synchronizations)."""
    from rtsearch.batch import SpectraBatch
    from rtsearch.config import SearchConfig
    from rtsearch.scoring.database.engine import Engine

    engine = Engine(index, SearchConfig(), backend)
    out = {}
    for size in sizes:
        batches = [SpectraBatch.of(spectra[i : i + size]) for i in range(0, min(len(spectra), 200 * size), size)]
        for b in batches[:3]:
            engine.score(b)
        backend.synchronize()
        w0, c0 = time.perf_counter(), time.thread_time()
        for b in batches:
            engine.score(b)
        backend.synchronize()
        n = len(batches)
        out[str(size)] = {"wall_ms": round((time.perf_counter() - w0) * 1e3 / n, 3),
                          "cpu_ms": round((time.thread_time() - c0) * 1e3 / n, 3), "batches": n}  # fmt: skip
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--tools", type=Path, required=True, help="folder holding echo_floor.py")
    p.add_argument("--index-cache", type=Path, required=True)
    p.add_argument("--proteins", type=int, default=20_000)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--count", type=int, default=4000, help="spectra per phase")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL=ARGS",
                   help="rtsearch serve arguments, comma-separated (repeatable; default: none)")
    p.add_argument("--engine-batches", default="1,32,300", help="batch sizes the engine alone is timed at")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    backend, res, index = index_and_record(args.data, args.proteins, args.index_cache)
    res["rate"] = args.rate
    pool = [sp for run in RUNS for sp in read_spectra(args.data / run) if len(sp.charges) == 1 and not sp.problem]
    spectra = [pool[i % len(pool)] for i in range(args.count)]
    spectra = [type(sp)(**{**{f: getattr(sp, f) for f in sp.__dataclass_fields__}, "scan": i + 1})
               for i, sp in enumerate(spectra)]  # fmt: skip
    res["engine_alone"] = engine_alone(index, backend, spectra, [int(b) for b in args.engine_batches.split(",")])
    print(json.dumps({"engine_alone": res["engine_alone"]}), flush=True)
    del index
    phases = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        sp, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
        echo = subprocess.Popen([sys.executable, str(args.tools / "echo_floor.py"), "--spectra", sp, "--results", rp])
        try:
            time.sleep(1.0)
            line = {"phase": "echo floor", **send(sp, rp, spectra, args.rate, "floor")}
            print(json.dumps(line), flush=True)
            phases.append(line)
        finally:
            echo.kill()
            echo.wait(10)
        for label, extra in [tuple(v.split("=", 1)) for v in args.variant] or [("defaults", "")]:
            with Served(args.index_cache.resolve(), tmp / f"res-{label}", extra.replace(",", " ").split(),
                        tmp) as served:  # fmt: skip
                before, cpu0, t0 = histograms(served.port), cpu_by_thread(served.proc.pid), time.monotonic()
                line = {"phase": label, "args": extra,
                        **send(served.spectra, served.results, spectra, args.rate, f"probe-{label}")}  # fmt: skip
                after, cpu1, elapsed = histograms(served.port), cpu_by_thread(served.proc.pid), time.monotonic() - t0
            # each thread's share of a core over the phase (sending, collecting, the collector's idle wait)
            line["cpu_cores"] = {k: round((v - cpu0.get(k, 0.0)) / elapsed, 3) for k, v in
                                 sorted(cpu1.items(), key=lambda kv: -kv[1]) if v - cpu0.get(k, 0.0) > 0.005 * elapsed}
            for h in HISTOGRAMS:
                n = after.get(f"{h}_count", 0) - before.get(f"{h}_count", 0)
                line[f"{h}_mean"] = round((after.get(f"{h}_sum", 0) - before.get(f"{h}_sum", 0)) / n, 6) if n else None
            print(json.dumps(line), flush=True)
            phases.append(line)
    res["phases"] = phases
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
