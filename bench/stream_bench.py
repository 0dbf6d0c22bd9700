"""Streaming benchmark: the daemon fed by `rtsearch-sim` in another process, measured by its collector.

The daemon runs in this process on the ≥ 20,000-protein database of
`bench/search_bench.py`; each phase starts ``rtsearch-sim load`` (real MS2
spectra of the dev runs cycled at a fixed rate, PUSH → PULL, results
collected over SUB) and reads its JSON report: sent, answered, lost, latency
p50/p90/p99/max sent → received, throughput.

Phases:

- ``latency``: 200 spectra/s for ``--latency-seconds``.
- ``sweep``: increasing rates, ``--sweep-seconds`` each; the highest rate with 0 lost, 0 shed and
  p99 ≤ 50 ms is the sustained rate.

The daemon's memory over a long load is `bench/memory_soak.py`'s (``rtsearch serve`` under the shared client, every
process under it): this script's former ``soak`` phase (this process's RSS alone) was removed for it.

    python bench/stream_bench.py --data ../shared/data --phases latency,sweep --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulators"))

from bench.search_bench import entrapment_fasta  # noqa: E402
from bench.shell_probe import spawned_children, thread_cpu  # noqa: E402
from rtsearch.config import DatabaseConfig, SearchConfig, ServeConfig  # noqa: E402
from rtsearch.database.build import build_index  # noqa: E402
from rtsearch.database.store import load_index, save_index  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.scoring.database.engine import Engine  # noqa: E402
from rtsearch.search.database import DatabaseTarget  # noqa: E402
from rtsearch.serve.daemon import Daemon  # noqa: E402

RUNS = ("bsa-orbitrapxl/BSA1.mzML.gz", "ecoli-small/Ecoli_MS2_small.mzML", "yeast-small/SmallCalibratible_Yeast.mzML")
SUSTAINED_P99_MS = 50.0


def log_warnings() -> None:
    """The daemon's warnings (slow batches, shedding) go to stderr with a timestamp."""
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def get_index(data: Path, proteins: int, cache: Path | None, xp: Any,
              database: DatabaseConfig | None = None) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """The bench index (``database``'s digest; default `DatabaseConfig`'s), loaded from ``cache`` or built there."""
    info: dict[str, Any] = {}
    if cache is not None and (cache / "manifest.json").is_file():
        t0 = time.perf_counter()
        index = load_index(cache)
        info["index_load_seconds"] = round(time.perf_counter() - t0, 2)
        return index, info
    with tempfile.TemporaryDirectory() as tmp:
        fasta = Path(tmp) / "bench.fasta"
        info["proteins"] = entrapment_fasta(data, proteins, fasta)
        t0 = time.perf_counter()
        index = build_index([fasta], database or DatabaseConfig(), xp=xp)
        info["index_build_seconds"] = round(time.perf_counter() - t0, 2)
        info["index_stage_seconds"] = index.manifest["stage_seconds"]
    if cache is not None:
        save_index(index, cache)
        index = load_index(cache)
    return index, info


def histograms(daemon: Daemon) -> dict[str, dict[str, float]]:
    """Count, sum and cumulative buckets of the daemon's own histograms (for per-phase deltas)."""
    out: dict[str, dict[str, float]] = {}
    for fam in daemon.metrics.registry.collect():
        if fam.type != "histogram":
            continue
        h: dict[str, float] = {}
        for s in fam.samples:
            if s.name.endswith("_bucket"):
                h[f"le_{s.labels['le']}"] = s.value
            elif s.name.endswith(("_count", "_sum")):
                h[s.name.rsplit("_", 1)[1]] = s.value
        out[fam.name] = h
    return out


def counters(daemon: Daemon) -> dict[str, float]:
    """Value of each labelled counter sample of the daemon, as ``name{label=value}``."""
    out: dict[str, float] = {}
    for fam in daemon.metrics.registry.collect():
        if fam.type == "counter":
            for smp in fam.samples:
                if smp.name.endswith("_total"):
                    out[smp.name + str(sorted(smp.labels.items()))] = smp.value
    return out


def process_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads by name, and of its spawned children (intake, refits)."""
    out = {f"thread {k}": v for k, v in thread_cpu().items()}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in spawned_children():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[f"child {pid}"] = (int(stat[11]) + int(stat[12])) / tick
    return out


def delta(after: dict[str, dict[str, float]], before: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    d = {n: {k: v - before.get(n, {}).get(k, 0.0) for k, v in h.items()} for n, h in after.items()}
    for h in d.values():
        h["mean"] = h["sum"] / h["count"] if h.get("count") else float("nan")
    return d


def bucket_quantile(h: dict[str, float], q: float) -> str:
    """Upper bound (ms) of the histogram bucket holding quantile ``q``, as ``<= X ms``."""
    n = h.get("count", 0.0)
    bounds = sorted((float(k[3:]), v) for k, v in h.items() if k.startswith("le_"))
    for le, cum in bounds:
        if n and cum >= q * n:
            return f"<= {le * 1e3:g} ms" if le != float("inf") else "> last bucket"
    return "n/a"


async def load_phase(daemon: Daemon, runs: list[str], rate: float, seconds: float, tmp: Path) -> dict[str, Any]:
    """One ``rtsearch-sim load`` at ``rate`` for ``seconds``; its collector's report, plus the daemon's
    own histograms over the phase (engine batch time, batch size, queue wait) for diagnosis."""
    before, counts0, cpu0 = histograms(daemon), counters(daemon), process_cpu()
    out = tmp / f"sim-{rate:g}-{time.monotonic_ns()}.json"
    cmd = [
        sys.executable, "-m", "rtsearch_sim.cli", "load", *runs, "--mode", "push",
        "--endpoint", daemon.endpoints.spectra, "--collect", daemon.endpoints.results, "--rate", str(rate),
        "--count", str(int(rate * seconds)), "--run-size", "50000", "--json", str(out), "--wait", "10",
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await proc.communicate()
    if not out.is_file():
        raise RuntimeError(f"rtsearch-sim failed ({proc.returncode}): {stderr.decode()[-2000:]}")
    report = json.loads(out.read_text())
    report["rate"] = rate
    report["shed"] = report["by_status"].get("shed", 0)
    report["daemon"] = d = delta(histograms(daemon), before)
    n = max(report["answered"], 1)
    counts = counters(daemon)
    stages = {k.split("'stage', '")[1].split("'")[0]: (v - counts0.get(k, 0.0)) / n * 1e6
              for k, v in counts.items() if k.startswith("rtsearch_worker_seconds_total")}  # fmt: skip
    cpu = {k: (v - cpu0.get(k, 0.0)) / n * 1e6 for k, v in process_cpu().items()}
    report["worker_us_per_spectrum"] = stages
    report["cpu_us_per_spectrum"] = {k: round(v, 1) for k, v in cpu.items() if v >= 0.5}
    print(f"  {rate:>8,.0f}/s: {stdout.decode().strip()}", flush=True)
    print(f"            daemon: {d['rtsearch_batch_size']['count']:,.0f} batches, mean size "
          f"{d['rtsearch_batch_size']['mean']:.1f}, engine "
          f"{d['rtsearch_engine_batch_seconds']['mean'] * 1e3:.2f} ms/batch, "
          f"queue wait {d['rtsearch_queue_wait_seconds']['mean'] * 1e3:.2f} ms, receive->publish "
          f"{d['rtsearch_latency_seconds']['mean'] * 1e3:.2f} ms (means); p99 receive->publish "
          f"{bucket_quantile(d['rtsearch_latency_seconds'], 0.99)}, engine "
          f"{bucket_quantile(d['rtsearch_engine_batch_seconds'], 0.99)}, queue wait "
          f"{bucket_quantile(d['rtsearch_queue_wait_seconds'], 0.99)}", flush=True)
    print("            worker µs/spectrum: " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items())
          + "; CPU µs/spectrum: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(
              report["cpu_us_per_spectrum"].items(), key=lambda kv: -kv[1])), flush=True)  # fmt: skip
    return report


def sustained(r: dict[str, Any]) -> bool:
    return r["lost"] == 0 and r["shed"] == 0 and r["latency_ms"].get("p99", 1e9) <= SUSTAINED_P99_MS


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    backend = get_backend(args.backend)
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"), "backend": backend.name, "device": backend.device,
        "cpu": platform.processor() or platform.machine(),
    }  # fmt: skip
    index, info = get_index(args.data, args.proteins, args.index_cache, backend.xp)
    res.update(info)
    res["index_counts"] = index.manifest["counts"]
    # --no-fused: device preprocessing as before the fused kernel (CuPy calls, batches above 128 spectra)
    engine = DatabaseTarget(index, SearchConfig(), engine=Engine(
        index, SearchConfig(), backend, fused_preprocess=not args.no_fused,
        **({"host_preprocess_max": 128} if args.no_fused else {}),
    ))  # fmt: skip
    runs = [str(args.data / r) for r in RUNS]
    phases = args.phases.split(",")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        cfg = ServeConfig(
            spectra="tcp://127.0.0.1:*", spectra_mode="pull", results="tcp://127.0.0.1:*", metrics_port=0,
            results_dir=str(tmp / "results"), workers=args.workers, max_batch=args.max_batch,
            max_queue=max(8 * args.max_batch, 32768),
        )  # fmt: skip
        stop = asyncio.Event()
        daemon = Daemon(engine, cfg)
        task = asyncio.create_task(daemon.run(stop))
        await daemon.ready.wait()
        print(f"daemon ready on {backend.name} ({backend.device}); index {index.manifest['counts']}", flush=True)
        try:
            if "latency" in phases:
                print("latency phase", flush=True)
                res["latency_200"] = await load_phase(daemon, runs, 200.0, args.latency_seconds, tmp)
            if "sweep" in phases:
                print("sweep", flush=True)
                sweep = []
                for rate in [float(r) for r in args.rates.split(",")]:
                    r = await load_phase(daemon, runs, rate, args.sweep_seconds, tmp)
                    sweep.append(r)
                    if r["lost"] or r["shed"] or r["latency_ms"].get("p99", 1e9) > 20 * SUSTAINED_P99_MS:
                        break  # overloaded: higher rates only shed more
                res["sweep"] = sweep
                ok = [r["rate"] for r in sweep if sustained(r)]
                res["sustained_rate"] = max(ok) if ok else 0.0
        finally:
            stop.set()
            await task
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="the shared/data folder")
    ap.add_argument("--backend", default="auto", choices=["auto", "cupy", "numpy"])
    ap.add_argument("--proteins", type=int, default=20_000)
    ap.add_argument("--index-cache", type=Path, help="save the built index here / load it if present")
    ap.add_argument("--phases", default="latency,sweep", help="comma list of latency, sweep")
    ap.add_argument("--latency-seconds", type=float, default=30.0)
    ap.add_argument("--sweep-seconds", type=float, default=10.0)
    ap.add_argument("--rates", default="1000,2000,5000,10000,15000,20000,25000,30000,40000")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--stalls", action="store_true", help="log GC pauses and GIL stalls over 2 ms (bench/stalls.py)")
    ap.add_argument("--max-batch", type=int, default=4096)
    ap.add_argument("--no-fused", action="store_true",
                    help="preprocess as before the fused kernel: CuPy calls, batches above 128 spectra (to compare)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    log_warnings()
    if args.stalls:
        import stalls

        stalls.watch()
    res = asyncio.run(bench(args))
    if args.stalls:
        print(stalls.report())
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    print(json.dumps({k: v for k, v in res.items() if k not in ("sweep", "latency_200")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
