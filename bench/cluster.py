"""Scale-out: the partition's work balance, then the daemon with 1 engine and as the front door of N cluster
workers (or K lanes), under the shared client, the echo floor beside.

1. **Balance** (no daemon): the bench index (`bench.harness.bench_index`) cut by Li et al.'s
   equal-work rule (`rtsearch.cluster.partition`) into N = 2, 4, 8 pieces; per piece, the index's candidates
   (the rule's own measure) and the candidates the bench spectra (the dev runs' MS2, what ``rt_load.py`` sends)
   meet in their precursor window (±``--ppm``, the work a search does), with Li's cuts and with the cuts the
   daemon makes once those spectra came (`LiveCuts`); max / mean of each.
2. **Serving**: ``echo_floor.py`` under ``rt_load.py`` at 200/s (the floor), then ``rtsearch serve`` with
   ``--serve-args`` alone ("one engine") and with each ``--configs`` entry (``N:MODE[:GB]``, e.g. ``2:replicate``;
   ``2:partition:1.5``: each worker with room for 1.5 GB of the target, ``[serve] worker_memory_gb``: a slice;
   ``2:auto:0.6x``: room for 0.6 of the target; ``4:lanes:2``: ``--lanes 4`` on the host's first 2 GPUs, lane k on
   GPU k mod 2, its efficiency against ``4:lanes:1``; ``2:lanes:2:1``: the same with ``--cluster 1``, each lane
   scoring through a worker of its own, against ``2:lanes:1:1``; ``2:lanes:2:2:partition``: each lane a partition
   of two pieces, one a GPU, against ``2:lanes:1:2:partition``; ``2:lanes:2:2:auto:0.6x``: the same with room for
   0.6 of the target a worker (a target too large for one: auto partitions); ``…:shared`` at the end: the lanes
   sharing one cluster of C workers (``--lane-workers shared``); every configuration on G > 1 GPUs
   also against the best one-GPU configuration of the run: ``best_one_gpu_efficiency``),
   each under ``rt_load.py --senders S`` at ``--rates``: answered, lost, duplicates, shed and latency per rate;
   the scored spectra a second at each rate ((answered − shed) / seconds) gives the capacity, and the efficiency
   of N workers is capacity(N) / (N × capacity(1)).

``--placement local`` starts the workers as processes of this host (``--gpus-per-worker 1`` spreads them over its
GPUs; 0: CPU workers or one shared GPU); ``ray`` as Ray actors. One JSON line per measurement; ``--json`` writes
them all.

    python3 bench/cluster.py --data ../shared/data --tools ../shared/tools --configs 1:replicate,2:replicate \\
        --rates 2000,8000 --seconds 10 --json cluster.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from bench.harness import bench_index, dev_spectra, emit, inputs, write_mgf  # noqa: E402
from bench.served import Served, cpu_by_thread, echo_floor, rt_load  # noqa: E402
from rtsearch.cluster.partition import (  # noqa: E402
    LiveCuts,
    balance,
    bin_work,
    equal_work_cuts,
    owners,
    piece_work,
    spectrum_masses,
)
from rtsearch.io.spectra import read_spectra  # noqa: E402
from tests.streaming import scrape  # noqa: E402

# --configs labels as rtsearch serve arguments: N:MODE[:ROOM] (one daemon, N cluster workers) or
# K:lanes:G[:C[:MODE[:ROOM]]][:shared|:own][:xP] (lanes; see `_lanes_args`)

def serve_args(c: str, tmp: Path, args: argparse.Namespace, one: list[str], target_gb: float) -> list[str]:
    """Label ``c``'s serve arguments (``one``: those of the lone engine, which lanes without a cluster keep;
    ``target_gb``: the target's size on a device, for ``ROOM`` given as a fraction)."""
    if c.split(":")[1] == "lanes":
        return _lanes_args(c, tmp, args, one, target_gb)
    n, mode, *rest = c.split(":")
    toml = config_file(tmp, c, args.search_toml, args.gpus_per_worker, room_gb((rest or ["0"])[0], target_gb),
                       args.serve_toml)
    return ["--cluster", n, "--cluster-mode", mode, "--placement", args.placement, "--config", str(toml)]


def room_gb(text: str, target_gb: float) -> float:
    """``worker_memory_gb`` of a ``--configs`` entry: GB, or ``0.6x``: that fraction of the target."""
    return float(text[:-1]) * target_gb if text.endswith("x") else float(text)


def _lanes_args(c: str, tmp: Path, args: argparse.Namespace, one: list[str], target_gb: float) -> list[str]:
    """``K:lanes:G[:C[:MODE[:ROOM]]][:shared|:own][:xP]``'s serve arguments: ``--lanes K``, with ``--cluster C``
    (its workers on GPUs, one each, where ``--gpus-per-worker`` says so) in ``MODE`` (default: the daemon's, auto),
    each worker with room for ``ROOM`` of the target (GB, or ``0.6x``: that fraction; default: its share of its GPU);
    ``shared``: the lanes send to one cluster of C workers (``--lane-workers``; default: the daemon's); ``xP``:
    partition, P workers a piece (``[serve] piece_workers``: C / P pieces)."""
    k, _, _, *rest = c.split(":")
    per_piece = rest.pop()[1:] if rest and rest[-1][:1] == "x" else "1"
    share = rest.pop() if rest and rest[-1] in ("shared", "own") else ""
    if not rest:
        return ["--lanes", k, *one]
    room = room_gb(rest[2], target_gb) if len(rest) > 2 else 0.0
    toml = config_file(tmp, c, args.search_toml, args.gpus_per_worker, room,
                       serve=f"{args.serve_toml}\npiece_workers = {per_piece}")
    return ["--lanes", k, "--cluster", rest[0], *(["--cluster-mode", rest[1]] if len(rest) > 1 else []),
            *(["--lane-workers", share] if share else []), "--placement", args.placement,
            "--config", str(toml)]  # fmt: skip


def config_file(tmp: Path, label: str, search: str, gpus: float = 0.0, memory_gb: float = 0.0, serve: str = "") -> Path:
    """A configuration file: ``search`` as its [search] section; [serve] with the workers' GPUs and memory and
    ``serve``'s lines."""
    path = tmp / f"config-{label.replace(':', '-')}.toml"
    path.write_text((f"[search]\n{search}\n" if search else "")
                    + f"[serve]\ngpus_per_worker = {gpus}\nworker_memory_gb = {memory_gb}\n{serve}\n")  # fmt: skip
    return path


# reading a cluster's daemon: its workers' counters, what it did over a rate, its admission, the GPUs

def by_worker(samples: dict[str, float], name: str) -> dict[str, float]:
    """``rtsearch_cluster_<name>_total`` (``spectra``, ``busy_seconds``) by worker, from `scrape`'s samples."""
    return {m[0]: v for k, v in samples.items()
            if (m := re.findall(rf'^rtsearch_cluster_{name}_total\{{worker="(w[\d.]+)"\}}$', k))}  # fmt: skip


def summed(samples: dict[str, float]) -> dict[str, float]:
    """`scrape`'s samples of a lanes' front (each labelled ``lane``, `rtsearch.serve.observe.lane_metrics`) as one
    daemon's: the label dropped and the lanes' values summed, a worker ``w0`` of lane 1 named ``w0.1``."""
    out: dict[str, float] = {}
    for key, v in samples.items():
        lane = re.search(r',?lane="(\w+)"', key)
        if lane is not None:
            key = key[: lane.start()] + key[lane.end():]
            key = re.sub(r'worker="(w\d+)"', rf'worker="\1.{lane[1]}"', key).replace("{,", "{").replace("{}", "")
        out[key] = out.get(key, 0.0) + v
    return out


def inside(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, Any]:
    """What the daemon did over one rate: its batches (how many, mean size, mean engine seconds, how many took over
    20, 50, 100 ms), its engine threads' seconds by stage, the spectra shed by reason, the spectra's age on arrival
    (mean; how many over 10, 25, 50 ms), and each cluster worker's scoring seconds over the rate's seconds (how busy
    its GPU was kept), the spectra it scored and in how many rounds (`round_sizes`)."""
    d = {k: v - before.get(k, 0.0) for k, v in after.items()}
    n = d.get("rtsearch_batch_size_count", 0.0)
    bucket = 'rtsearch_engine_batch_seconds_bucket{{le="{}"}}'
    slow: dict[str, Any] = {f"over_{ms}_ms": int(n - d.get(bucket.format(ms / 1e3), n))
                            for ms in (20, 50, 100)}  # batches slower than that (the engine's histogram buckets)
    for name, key in (("latency", "answered_over"), ("queue_wait", "waited_over"), ("arrival_age", "arrived_over"),
                      ("intake_wait", "intake_over")):
        # spectra, receipt to answer, to a batch; sent to receipt, receipt to the daemon (what the door sheds by)
        total = d.get(f"rtsearch_{name}_seconds_count", 0.0)
        slow[key] = {ms: int(total - d.get(f'rtsearch_{name}_seconds_bucket{{le="{ms / 1e3}"}}', total))
                     for ms in (10, 25, 50)}  # fmt: skip
    aged = d.get("rtsearch_arrival_age_seconds_count", 0.0)
    slow["mean_arrival_age_ms"] = round(1e3 * d.get("rtsearch_arrival_age_seconds_sum", 0.0) / aged, 2) if aged else 0
    return {"batches": int(n), "mean_batch": round(d.get("rtsearch_batch_size_sum", 0.0) / n, 1) if n else None,
            "mean_batch_ms": round(1e3 * d.get("rtsearch_engine_batch_seconds_sum", 0.0) / n, 2) if n else None,
            **slow, "stage_s": {m[0]: round(v, 2) for k, v in d.items()
                                if (m := re.findall(r'^rtsearch_worker_seconds_total\{stage="(\w+)"', k))},
            "shed_by": {m[0]: int(v) for k, v in d.items()
                        if v and (m := re.findall(r'^rtsearch_shed_total\{reason="(\w+)"', k))},
            "busy": {w: round(v / seconds, 3) for w, v in by_worker(d, "busy_seconds").items()},
            "rounds": {w: round(v, 1) for w, v in by_worker(d, "rounds").items()},
            "spectra": {w: int(v) for w, v in by_worker(d, "spectra").items()}}


def admission(raw: dict[str, float]) -> dict[str, dict[str, float]]:
    """Each lane's admission as the rate ends (gauges, ms): the door's last advised wait and the time model's terms it
    predicts by (`rtsearch.serve.observe.metrics.MODEL_TERMS`: the engine's, the tail's, the results thread's, each a
    batch and a spectrum) — a model inflated by a loaded host sheds at the door."""
    out: dict[str, dict[str, float]] = {}
    for key, v in raw.items():
        lane = m[0] if (m := re.findall(r'lane="(\w+)"', key)) else "0"
        if key.startswith("rtsearch_admission_wait_seconds"):
            out.setdefault(lane, {})["wait_ms"] = round(v * 1e3, 3)
        elif (t := re.findall(r'^rtsearch_engine_model_seconds\{.*term="(\w+)"', key)):
            out.setdefault(lane, {})[f"{t[0]}_ms"] = round(v * 1e3, 4)
    return out


def worker_pids(log: str) -> dict[str, int]:
    """Each cluster worker's pid from the daemon's log ("cluster: w0 up (pid N"), in order; behind lanes, each
    lane's w0 named apart (``w0``, ``w0.1``, ...; their first pids, not restarts; lanes sharing the workers: each
    once)."""
    pids: dict[str, int] = {}
    for name, pid in re.findall(r"cluster: (w\d+) up \(pid (\d+)", log):
        if int(pid) in pids.values():
            continue
        key = next(k for k in (name, *(f"{name}.{i}" for i in range(1, 1000))) if k not in pids)
        pids[key] = int(pid)
    return pids


def round_sizes(spectra: dict[str, float], rounds: dict[str, float], pids: dict[str, int]) -> dict[str, float]:
    """Each worker process's mean round (the batches waiting at it, scored as one), in spectra, from `inside`'s
    ``spectra`` and ``rounds`` by lane (a shared worker's lanes summed, as `busy_by_process` does)."""
    s, r = busy_by_process(spectra, pids), busy_by_process(rounds, pids)
    return {w: round(s[w] / r[w], 1) for w in s if r.get(w)}


def busy_by_process(busy: dict[str, float], pids: dict[str, int]) -> dict[str, float]:
    """Each worker process's busy fraction from `inside`'s ``busy`` (by lane: ``w0.1`` is lane 1's ``w0``) and
    `worker_pids`: a worker the lanes share (one process of that name) counted by every lane's door for its own
    spectra's share of each merged batch, so its lanes' figures summed; a lane's own worker as it is. (Read lane by
    lane, the shared partition workers looked 0.2-0.4 busy while they were 0.8-0.9: docs/history/RESULTS.md,
    2026-11-27.)"""
    processes: dict[str, int] = {}
    for key in pids:
        processes[key.split(".")[0]] = processes.get(key.split(".")[0], 0) + 1
    out: dict[str, float] = {}
    for key, v in busy.items():
        name = key.split(".")[0]
        key = name if processes.get(name) == 1 else key
        out[key] = round(out.get(key, 0.0) + v, 3)
    return out


def host_cpu() -> tuple[int, int]:
    """This host's CPU time so far, all CPUs together, from /proc/stat's first line: (busy, total) ticks (busy: all
    but idle and iowait); two readings' differences give how busy the host was between them (`host_busy`)."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    total = sum(ticks[:8])  # user nice system idle iowait irq softirq steal (guest time is inside user)
    return total - ticks[3] - ticks[4], total


def host_busy(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The share of the host's CPU time that was busy between two `host_cpu` readings (``None``: unknown)."""
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total, 3) if total > 0 else None


def gpu_memory() -> list[int]:
    """Memory used on each GPU of the host now (MiB; empty without nvidia-smi)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(x) for x in out.split()]


def gpu_processes() -> list[str]:
    """``pid, process name, GPU, MiB`` of each process holding GPU memory now (empty without nvidia-smi)."""
    try:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name,gpu_bus_id,used_memory",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=20, check=True).stdout
        buses = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id,index", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    index = dict(line.split(", ") for line in buses.splitlines() if ", " in line)
    rows = [line.split(", ") for line in apps.splitlines() if line.count(", ") == 3]

    def comm(pid: str, name: str) -> str:  # what the process named itself (lane_0, engine_0, ...)
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return Path(name).name

    return [f"{pid} {comm(pid, name)} GPU {index.get(bus, bus)} {mib}" for pid, name, bus, mib in rows]


def passed(row: dict[str, Any], p99_ms: float) -> bool:
    """Whether a rate's row counts towards a capacity: nothing lost or answered twice, p99 within ``p99_ms``."""
    return row["lost"] == 0 and row["duplicates"] == 0 and row["latency_ms"]["p99"] <= p99_ms


def gpus_of(config: str) -> int:
    """The GPUs a ``--configs`` entry scores on (with ``--gpus-per-worker 1``): N of ``N:MODE``, G of
    ``K:lanes:G``, 1 for one engine."""
    parts = config.split(":")
    return int(parts[2]) if parts[1:2] == ["lanes"] else int(parts[0]) if parts[0].isdigit() else 1


def refined_rate(tried: list[tuple[float, bool]], *, finest: float = 1000.0) -> float | None:
    """The next rate to offer between the highest that passed and the lowest above it that failed (``tried``: each
    rate offered and whether it passed), halfway and rounded to 100 /s; ``None`` when nothing passed, nothing above
    failed, or they are within ``finest`` of each other. A grid's steps bound a capacity (and an efficiency, a ratio
    of two) to their width: 7,000 at one GPU where 10,000 failed (docs/history/RESULTS.md, 2026-11-27)."""
    passed = [r for r, ok in tried if ok]
    if not passed:
        return None
    best = max(passed)
    above = [r for r, ok in tried if not ok and r > best]
    if not above or min(above) - best < finest:
        return None
    return float(round((best + min(above)) / 2, -2))


def balances(index: Any, mgf: Path, ppm: float) -> list[dict[str, Any]]:
    """Phase 1 (see the module docstring)."""
    masses = np.sort(np.asarray(index.mass, np.float64))
    work, start = bin_work(masses)
    spectra = list(read_spectra(mgf))
    sm = spectrum_masses(np.array([s.precursor_mz for s in spectra]), [s.charges for s in spectra])
    met = np.searchsorted(masses, sm * (1 + ppm * 1e-6), side="right") - np.searchsorted(masses, sm * (1 - ppm * 1e-6))
    rows = []
    for n in (2, 4, 8):
        cuts = equal_work_cuts(work, start, n)
        per_index = piece_work(work, start, cuts)
        per_spectra = np.bincount(owners(sm, cuts), weights=met, minlength=n)
        live = LiveCuts(work, start, n, every=sm.size)  # the daemon's cuts once these spectra came
        live.add(sm, met)
        per_live = np.bincount(owners(sm, live.cuts), weights=met, minlength=n)
        rows.append({"phase": "balance", "pieces": n, "cuts_da": np.round(cuts, 1).tolist(),
                     "index_candidates": per_index.astype(int).tolist(),
                     "index_max_over_mean": round(balance(per_index), 4),
                     "spectra": len(spectra), "spectra_candidates": per_spectra.astype(int).tolist(),
                     "spectra_max_over_mean": round(balance(per_spectra), 4),
                     "live_cuts_da": np.round(live.cuts, 1).tolist(), "spectra_live": per_live.astype(int).tolist(),
                     "spectra_live_max_over_mean": round(balance(per_live), 4)})  # fmt: skip
    return rows


def serving(args: argparse.Namespace, mgf: Path, tmp: Path, target_gb: float) -> list[dict[str, Any]]:
    """Phase 2 (see the module docstring); ``target_gb``: the target's size on a device."""
    rows: list[dict[str, Any]] = []
    with echo_floor(args.tools) as (sp, rp):
        for r in rt_load(args.tools, mgf, sp, rp, "--rates", "200", "--seconds", "10", "--tag", "floor"):
            rows.append({"phase": "floor", **r})
            print(json.dumps(rows[-1]), flush=True)
    one = [] if not (args.search_toml or args.serve_toml) else \
        ["--config", str(config_file(tmp, "one", args.search_toml, serve=args.serve_toml))]  # fmt: skip
    configs = [("one engine", one)] * (not args.skip_engine) + [
        (c, serve_args(c, tmp, args, one, target_gb)) for c in args.configs.split(",") if c]
    for label, extra in configs:
        try:
            one_config(args, mgf, tmp, label, extra, rows)
        except RuntimeError as e:  # a daemon that did not start: said, and the next configuration measured
            if "rtsearch serve exited" not in str(e):
                raise
            why = next((line for line in str(e).splitlines() if " ERROR " in line), str(e).splitlines()[0])
            rows.append({"phase": "not_started", "config": label, "why": why[:300]})
            print(json.dumps(rows[-1]), flush=True)
    rows += capacities(rows, args)
    return rows


def one_config(args: argparse.Namespace, mgf: Path, tmp: Path, label: str, extra: list[str],
               rows: list[dict[str, Any]]) -> None:  # fmt: skip
    """One configuration's daemon at every rate (its rows appended to ``rows``); `RuntimeError` when it does not
    start."""
    t0 = time.perf_counter()
    parts = label.split(":")  # K:lanes:G — K lanes on the first G GPUs (lane k on GPU k mod G)
    env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(int(parts[2]))))} if parts[1:2] == ["lanes"] else None
    with Served(args.index_cache.resolve(), tmp / f"res-{len(rows)}", [*args.serve_args.split(), *extra],
                tmp, env=env) as served:  # fmt: skip
        ready_s = time.perf_counter() - t0
        pids = worker_pids("".join(served.log))
        gpus = dict(re.findall(r"cluster: (w\d+) up \(pid \d+, piece -?\d+, \w+ on GPU (\d+)", "".join(served.log)))
        passed, failed, tried = False, 0, []  # past capacity: `--stop-after` rates in a row over p99 or lost
        for rate in args.rates.split(","):
            if passed and args.stop_after and failed >= args.stop_after:
                break
            ok = one_rate(args, served, mgf, label, rate, ready_s, rows, pids)
            passed, failed = passed or ok, 0 if ok else failed + 1
            tried.append((float(rate), ok))
        for _ in range(args.refine):  # halfway between the best rate that passed and the next that did not
            if (mid := refined_rate(tried)) is None:
                break
            tried.append((mid, one_rate(args, served, mgf, label, f"{mid:g}", ready_s, rows, pids)))
        for share in [] if any(ok for _, ok in tried) else [float(x) for x in args.below.split(",") if x]:
            low = float(args.rates.split(",")[0]) * share  # none passed: lower, until one does
            if one_rate(args, served, mgf, label, f"{low:g}", ready_s, rows, pids):
                break
        if env:
            rows.append({"phase": "workers", "config": label, "gpu_memory_mib": gpu_memory(),
                         "gpu_processes": gpu_processes()})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
        if pids:
            per = by_worker(summed(scrape(served.port)), "spectra")
            rows.append({"phase": "workers", "config": label, "gpu_of": gpus, "spectra": per,
                         "max_over_mean": round(balance(np.array(list(per.values()), float)), 4) if per else None,
                         "gpu_memory_mib": gpu_memory()})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
            logs = args.json.parent if args.json else tmp  # the daemon's last lines (slow batches, deaths)
            logs.mkdir(parents=True, exist_ok=True)
            (logs / f"daemon-{label.replace(':', '-')}.log").write_text("".join(served.log))
            killing = args.kill_configs is None or label in args.kill_configs.split(",")
            if args.kill_rate and len(pids) > 1 and killing:  # a lone worker's spectra would wait for its restart
                rows.append(killed(args, mgf, served, label, pids))
                print(json.dumps(rows[-1]), flush=True)


def one_rate(args: argparse.Namespace, served: Served, mgf: Path, label: str, rate: str, ready_s: float,
             rows: list[dict[str, Any]], pids: dict[str, int]) -> bool:  # fmt: skip
    """``rt_load.py`` at ``rate`` for ``--seconds``: its row (the daemon meanwhile beside the client's figures: each
    worker process's busy share and mean round, `busy_by_process`, `round_sizes`; ``cpu_s``, each thread's CPU
    seconds over the rate's ``wall``, every lane's; ``host_busy``) appended to ``rows``; whether it passed."""
    before = summed(scrape(served.port))
    ok = True
    cpu0, host0, t0 = cpu_by_thread(served.proc.pid), host_cpu(), time.perf_counter()
    lines = rt_load(args.tools, mgf, served.spectra, served.results, "--rates", rate, "--seconds", str(args.seconds),
                    "--senders", str(args.senders), "--budget-ms", str(args.budget_ms), "--tag", label)  # fmt: skip
    for r in lines:
        shed = r.get("statuses", {}).get("shed", 0)
        raw = scrape(served.port)
        scored, after = (r["answered"] - shed) / args.seconds, summed(raw)
        did = inside(before, after, args.seconds)
        cpu = {k: round(v - cpu0.get(k, 0.0), 2) for k, v in cpu_by_thread(served.proc.pid).items()}
        did["cpu_s"] = {k: v for k, v in cpu.items() if v > 0.05} | {"wall": round(time.perf_counter() - t0, 2)}
        did["host_busy"] = host_busy(host0, host_cpu())  # all of the host's CPUs (the client's and workers' too)
        rows.append({"phase": "serve", "config": label, "ready_s": round(ready_s, 1),
                     "scored_per_s": round(scored, 1), **did, "busy_process": busy_by_process(did["busy"], pids),
                     "round_spectra": round_sizes(did["spectra"], did["rounds"], pids),
                     "admission": admission(raw), **r})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
        ok = ok and passed(r, args.p99_ms)
    return ok


def killed(args: argparse.Namespace, mgf: Path, served: Served, label: str, pids: dict[str, int]) -> dict[str, Any]:
    """``rt_load.py`` at ``--kill-rate`` with the first worker SIGKILLed a third of the way in: what was answered,
    and whether it came back (an "up" line of its name with a pid not seen before)."""
    load = subprocess.Popen(
        [sys.executable, str(args.tools / "rt_load.py"), str(mgf), "--spectra", served.spectra, "--results",
         served.results, "--rates", str(args.kill_rate), "--seconds", str(args.seconds), "--senders",
         str(args.senders), "--budget-ms", str(args.budget_ms), "--drain", "30", "--tag", f"killed {label}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(args.seconds / 3)
    victim, pid = next(iter(pids.items()))
    name = victim.split(".")[0]
    os.kill(pid, signal.SIGKILL)
    killed_at = time.perf_counter()
    out, err = load.communicate(timeout=args.seconds + 120)
    back = None
    while back is None and time.perf_counter() - killed_at < 60:
        # an "up" line with a new pid (the first one may have left the log's last lines: a piece no other worker
        # covers answers its batches with an error meanwhile, a traceback each)
        ups = {int(p) for p in re.findall(rf"cluster: {name} up \(pid (\d+)", "".join(served.log))}
        back = round(time.perf_counter() - killed_at, 1) if ups - set(pids.values()) else None
        time.sleep(0.2)
    (r,) = [json.loads(x) for x in out.splitlines() if '"offered_hz"' in x] or [{"error": err[-1000:]}]
    return {"phase": "killed", "config": label, "killed": f"{victim} (pid {pid})", "back_within_s": back, **r}


def capacities(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each configuration's capacity: the most scored spectra a second among its rates with 0 lost, 0 duplicates
    and p99 <= ``--p99-ms`` (0 where no rate qualified), and the most at any p99 (saturated: the rest shed); the
    efficiency of N workers, both ways, against the first one-worker configuration. At the saturated rate, where
    the workers reported their scoring time: their busy shares, the spectra a second of scoring gave
    (``per_busy_s``: what a GPU-second does, whatever the daemon left it idle) and that against one worker's
    (``busy_efficiency``: below 1, the GPUs' own work got dearer — smaller or split batches — and not only idler)."""
    caps: dict[str, list[float]] = {}
    at_most: dict[str, dict[str, Any]] = {}  # each configuration's saturated row
    for r in rows:
        if r["phase"] != "serve":
            continue
        cap = caps.setdefault(r["config"], [0.0, 0.0])
        if passed(r, args.p99_ms):
            cap[0] = max(cap[0], r["scored_per_s"])
        if r["scored_per_s"] >= cap[1]:
            cap[1], at_most[r["config"]] = r["scored_per_s"], r
    per_busy = {c: r["scored_per_s"] / sum(r["busy"].values()) for c, r in at_most.items()
                if sum(r.get("busy", {}).values()) > 0}  # fmt: skip
    single = next((caps[c] for c in caps if c.split(":")[0] == "1"), None)
    one_busy = next((per_busy[c] for c in caps if c.split(":")[0] == "1" and c in per_busy), None)
    one_gpu_caps = [cap for c, (cap, _) in caps.items() if gpus_of(c) == 1]
    best_one = max(one_gpu_caps, default=0.0)
    out = []
    for c, (cap, most) in caps.items():
        n = int(c.split(":")[0]) if c[0].isdigit() else 1
        one_gpu = single
        if c.split(":")[1:2] == ["lanes"]:  # K lanes on G GPUs against the same K lanes on one GPU
            n, one_gpu = int(c.split(":")[2]), caps.get(":".join([*c.split(":")[:2], "1", *c.split(":")[3:]]))
        pairs = zip((cap, most), one_gpu or (0.0, 0.0), strict=True)
        eff = [round(x / (n * one), 3) if one and n > 1 else None for x, one in pairs]
        busy = {"busy_at_saturated": at_most[c].get("busy_process", at_most[c].get("busy")),
                "per_busy_s": round(per_busy[c], 1),
                "busy_efficiency": round(per_busy[c] / one_busy, 3) if one_busy else None} if c in per_busy else {}
        out.append({"phase": "capacity", "config": c, "p99_ms_at_most": args.p99_ms, "scored_per_s": cap,
                    "efficiency": eff[0], "saturated_per_s": most, "saturated_efficiency": eff[1],
                    "best_one_gpu_efficiency": round(cap / (gpus_of(c) * best_one), 3) if best_one and gpus_of(c) > 1
                    else None, **busy})  # fmt: skip
        print(json.dumps(out[-1]), flush=True)
    return out


def _database(lines: str) -> Any:
    """The `DatabaseConfig` of ``lines`` (a [database] table's body; ``None`` when empty: the default digest)."""
    if not lines:
        return None
    from rtsearch.config import load_config

    with tempfile.TemporaryDirectory() as t:
        path = Path(t) / "database.toml"
        path.write_text(f"[database]\n{lines}\n")
        return load_config(str(path)).database


def _free_device_memory() -> None:
    """CuPy's pools handed back to the driver (nothing without CuPy)."""
    import gc

    gc.collect()
    try:
        import cupy
    except ImportError:
        return
    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    inputs(ap, spectra=None)
    ap.add_argument("--tools", type=Path, required=True, help="a folder holding rt_load.py and echo_floor.py")
    ap.add_argument("--ppm", type=float, default=20.0, help="precursor window of the balance's spectra")
    ap.add_argument("--serve-args", default="")
    ap.add_argument("--configs", default="2:replicate,2:partition", help="N:MODE[:GB],... (beside one engine)")
    ap.add_argument("--placement", choices=("local", "ray"), default="local")
    ap.add_argument("--gpus-per-worker", type=float, default=0.0)
    ap.add_argument("--rates", default="2000")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--refine", type=int, default=0, metavar="N", help="after a configuration's --rates, up to N more "
                    "halfway between the best rate that passed and the next that failed (to 1,000 /s)")
    ap.add_argument("--stop-after", type=int, default=0, metavar="N", help="a configuration's remaining rates skipped "
                    "after N in a row over --p99-ms or with losses, once one rate was within (0: every rate)")
    ap.add_argument("--senders", type=int, default=2)
    ap.add_argument("--budget-ms", type=float, default=100.0)
    ap.add_argument("--p99-ms", type=float, default=50.0, help="a rate counts towards capacity at this p99 or less")
    ap.add_argument("--kill-rate", type=float, default=0.0,
                    help="per cluster configuration: rt_load at this rate, a worker killed mid-run")  # fmt: skip
    ap.add_argument("--kill-configs", default=None, metavar="C,...", help="the kill phase in these --configs only "
                    "(default: every one with several workers)")  # fmt: skip
    ap.add_argument("--search-toml", default="",
                    help='[search] lines for each config, e.g. \'precursor_tolerance = "500 ppm"\'')  # fmt: skip
    ap.add_argument("--below", default="0.75,0.5", metavar="SHARES",
                    help="when no rate passed: these shares of the first rate in turn, until one passes (a slow "
                         "host's capacity still measured; empty: none)")
    ap.add_argument("--serve-toml", default="", help="[serve] lines for each config, e.g. 'linger_ms = 10.0'")
    ap.add_argument("--database-toml", default="",
                    help='[database] lines of the bench index, e.g. \'specificity = "semi"\' (~20x the peptides: a '
                    "target whose scoring makes the GPU the limit at 20 ppm; give it its own --index-cache)")
    ap.add_argument("--results-root", type=Path, default=None, metavar="DIR", help="the bench's temporary folder "
                    "(the daemons' results files and journals) under DIR, e.g. /dev/shm: whether writing them to "
                    "the disk holds the daemons back (default: the system's temporary folder)")  # fmt: skip
    ap.add_argument("--skip-engine", action="store_true", help="serve through the --configs only")
    ap.add_argument("--balance-only", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    index, record = bench_index(args.data, args.proteins, args.index_cache, _database(args.database_toml))
    print(json.dumps(record), flush=True)
    with tempfile.TemporaryDirectory(dir=args.results_root) as t:
        tmp = Path(t)
        mgf = tmp / "runs.mgf"
        write_mgf(dev_spectra(args.data), mgf)
        rows = balances(index, mgf, args.ppm)
        for r in rows:
            print(json.dumps(r), flush=True)
        if not args.balance_only:
            from rtsearch.cluster.serve import target_bytes
            from rtsearch.config import SearchConfig
            from rtsearch.scoring.backend import get_backend
            from rtsearch.search.database import DatabaseTarget

            size = target_bytes(DatabaseTarget(index, SearchConfig(), get_backend("numpy")))
            del index  # the daemons open their own: this process's copy leaves the GPU (12 GB on GPU 0 otherwise)
            _free_device_memory()
            rows.append({"phase": "target", "device_gb": round(size / 1e9, 3)})
            print(json.dumps(rows[-1]), flush=True)
            rows += serving(args, mgf, tmp, size / 1e9)
    emit({**record, "rows": rows}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
