"""Reading a cluster's daemon for the scale-out benchmarks (`bench/cluster_bench.py`, `bench/topdown_daemon.py`):
its workers' counters (summed over a lanes' front's ``lane`` label), their pids from its log, the GPUs' memory and
the processes holding it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


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
