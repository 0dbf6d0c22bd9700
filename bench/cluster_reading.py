"""Reading a cluster's daemon for the scale-out benchmarks (`bench/cluster_bench.py`, `bench/topdown_daemon.py`):
its workers' counters (summed over a lanes' front's ``lane`` label), what it did over a rate (`inside`), its
admission's state (`admission`), its workers' pids from its log, the GPUs' memory and the processes holding it; and
the next rate a capacity's search offers (`refined_rate`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any


def by_worker(samples: dict[str, float], name: str) -> dict[str, float]:
    """``rtsearch_cluster_<name>_total`` (``spectra``, ``busy_seconds``) by worker, from `scrape`'s samples."""
    return {m[0]: v for k, v in samples.items()
            if (m := re.findall(rf'^rtsearch_cluster_{name}_total\{{worker="(w[\d.]+)"\}}$', k))}  # fmt: skip


def summed(samples: dict[str, float]) -> dict[str, float]:
    """`scrape`'s samples of a lanes' front (each labelled ``lane``, `rtsearch.serve.lane_metrics`) as one
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
    predicts by (`rtsearch.serve.metrics.MODEL_TERMS`: the engine's, the tail's, the results thread's, each a
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
    lane, the shared partition workers looked 0.2-0.4 busy while they were 0.8-0.9: bench/RESULTS.md, 2026-11-27.)"""
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
    of two) to their width: 7,000 at one GPU where 10,000 failed (bench/RESULTS.md, 2026-11-27)."""
    passed = [r for r, ok in tried if ok]
    if not passed:
        return None
    best = max(passed)
    above = [r for r, ok in tried if not ok and r > best]
    if not above or min(above) - best < finest:
        return None
    return float(round((best + min(above)) / 2, -2))


SLOW_PYTHON_S = 0.9  # a call's one-core loop slower than this: lanes saturate sooner (bench/RESULTS.md, 2026-11-27;
# not the only cause: a host at 0.77 s shed everything too, 2026-11-28 00:58)


def python_speed(host_txt: str) -> str | None:
    """The call's pure-Python loop (``host loop s X``, the first line `bench/cluster_call.sh` writes to host.txt) as
    a line of the summary, marked slow past `SLOW_PYTHON_S`: on 2026-11-27 every host where the daemon's lanes fell
    into the shedding state ran it in 0.93–1.12 s, those where they never did in 0.67–0.74 s; on 2026-11-28 one at
    0.77 s fell into it as well, so it is one cause among others. ``None``: no such line."""
    m = re.search(r"^host loop s ([0-9.]+)", host_txt, re.M)
    if m is None:
        return None
    s = float(m[1])
    return f"host: one-core Python loop {s:.2f} s" + (" (slow: lanes saturate sooner)" if s > SLOW_PYTHON_S else "")
