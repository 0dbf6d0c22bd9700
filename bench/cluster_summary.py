"""Issue 21's Done-when figures from one `bench/cluster_call.sh` call: each configuration's rows (offered, scored,
p99, shed; each worker process's busy share and mean round in spectra; the results thread's milliseconds a batch —
what grows in a run that sheds; the host's CPU) and, across the call's runs (partition, one-GPU and two-GPU
replicate are separate cluster benches), each mode's capacity on one GPU and on N, the efficiency against the best
one-GPU configuration, the work balance and the kills.

    python bench/cluster_summary.py cluster-call.tgz      (or the folder it unpacks to)
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cluster_reading import gpus_of, passed, python_speed  # noqa: E402


def rows_of(folder: Path) -> list[dict[str, Any]]:
    """Every JSON line of every run's ``cluster.log`` under ``folder``, each with its run's name (``run``)."""
    out = []
    for log in sorted(folder.rglob("cluster.log")):
        for line in log.read_text().splitlines():
            if line.startswith("{"):
                out.append({"run": log.parent.name, **json.loads(line)})
    return out


def mode(config: str) -> str:
    return "partition" if "partition" in config.split(":") else "replicate"


def capacity(rows: list[dict[str, Any]], p99_ms: float = 50.0) -> dict[str, tuple[float, float, float]]:
    """Each configuration's (capacity, offered there, its p99): the most scored spectra a second among its rates
    with 0 lost, 0 duplicates and p99 ≤ ``p99_ms`` (0 where none)."""
    out: dict[str, tuple[float, float, float]] = {}
    for r in rows:
        if r.get("phase") != "serve":
            continue
        best = out.get(r["config"], (0.0, 0.0, 0.0))
        if passed(r, p99_ms) and r["scored_per_s"] > best[0]:
            best = (r["scored_per_s"], r["offered_hz"], r["latency_ms"]["p99"])
        out[r["config"]] = best
    return out


def efficiencies(caps: dict[str, tuple[float, float, float]]) -> dict[str, dict[str, Any]]:
    """Per mode: the best one-GPU configuration and capacity, the best N-GPU one, and their efficiency a GPU
    (best N-GPU / (N × best one-GPU))."""
    out: dict[str, dict[str, Any]] = {}
    for m in ("replicate", "partition"):
        one = max(((c, v[0]) for c, v in caps.items() if mode(c) == m and gpus_of(c) == 1), key=lambda x: x[1],
                  default=None)  # fmt: skip
        many = max(((c, v[0]) for c, v in caps.items() if mode(c) == m and gpus_of(c) > 1), key=lambda x: x[1],
                   default=None)  # fmt: skip
        if one is None or many is None:
            continue
        eff = round(many[1] / (gpus_of(many[0]) * one[1]), 3) if one[1] else None
        out[m] = {"one_gpu": one, "n_gpus": many, "efficiency": eff}
    return out


def _busy(r: dict[str, Any]) -> str:
    return " ".join(f"{k} {v:.2f}" for k, v in sorted((r.get("busy_process") or r.get("busy") or {}).items()))


def _results_ms(r: dict[str, Any]) -> float | None:
    """The results thread's milliseconds a batch (its stages: building the answers, publishing, the GC)."""
    st, n = r.get("stage_s", {}), r.get("batches") or 0
    return round(1e3 * sum(st.get(k, 0.0) for k in ("results", "publish", "gc")) / n, 2) if n else None


def lane_cpu_s(r: dict[str, Any]) -> float | None:
    """The busiest lane process's CPU seconds over the row (its threads' ``cpu_s``, ``lane_K/...``, summed)."""
    lanes: dict[str, float] = {}
    for k, v in (r.get("cpu_s") or {}).items():
        if k.startswith("lane_"):
            lanes[k.split("/")[0]] = lanes.get(k.split("/")[0], 0.0) + v
    return round(max(lanes.values()), 2) if lanes else None


def report(rows: list[dict[str, Any]], host: str = "") -> str:
    """The summary of a call's ``rows`` (`rows_of`), after its host.txt's Python speed (``host``, when given)."""
    speed = python_speed(host)
    lines = [speed] if speed else []
    for r in rows:
        if r.get("phase") == "serve":
            lat = r["latency_ms"]
            lines.append(f"{r['run']:8} {r['config']:24} {r['offered_hz']:>8.0f} scored {r['scored_per_s']:>8.0f} "
                         f"p99 {lat['p99']:6.1f} shed {r['statuses'].get('shed', 0):>6} lost {r['lost']} "
                         f"batch {r['mean_batch']} results {_results_ms(r)} ms host {r.get('host_busy')} "
                         f"lane cpu {lane_cpu_s(r)} s of {(r.get('cpu_s') or {}).get('wall')} "
                         f"busy {_busy(r)} rounds {r.get('round_spectra')}")  # fmt: skip
        elif r.get("phase") == "workers" and "spectra" in r:
            lines.append(f"{r['run']:8} {r['config']:24} spectra a worker max/mean {r['max_over_mean']}")
        elif r.get("phase") == "not_started":
            lines.append(f"{r['run']:8} {r['config']:24} did not start: {r['why']}")
        elif r.get("phase") == "killed":
            lines.append(f"{r['run']:8} {r['config']:24} killed {r['killed']}: {r['answered']} / {r['sent']} "
                         f"answered, {r['lost']} lost, {r['duplicates']} duplicates, "
                         f"back in {r['back_within_s']} s")  # fmt: skip
    balance = next((r for r in rows if r.get("phase") == "balance" and r.get("pieces") == 2), None)
    if balance:
        lines.append(f"index cut in two: candidates max/mean {balance['index_max_over_mean']}")
    for group, runs in variants(rows).items():  # the call's own runs, then each variant's apart (an A/B's side)
        caps = capacity([r for r in rows if r["run"] in runs])
        tag = f" [{group}]" if group else ""
        for c, (cap, offered, p99) in caps.items():
            lines.append(f"capacity {c:24} {cap:>8.0f} /s (offered {offered:.0f}, p99 {p99}){tag}")
        for m, e in efficiencies(caps).items():
            lines.append(f"{m}: one GPU {e['one_gpu'][0]} {e['one_gpu'][1]:.0f}; {gpus_of(e['n_gpus'][0])} GPUs "
                         f"{e['n_gpus'][0]} {e['n_gpus'][1]:.0f}; efficiency a GPU {e['efficiency']}{tag}")  # fmt: skip
    return "\n".join(lines)


BASE_RUNS = ("par", "rep1", "rep2")  # bench/cluster_call.sh's runs as configured; the others rerun them otherwise


def variants(rows: list[dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """The runs read together: "" the call's own (`BASE_RUNS`), and each other run (an environment's A/B side,
    e.g. ``par_ab``) on its own, so that its figures never count as the call's."""
    names = sorted({r["run"] for r in rows if r.get("phase") == "serve"})
    out = {"": tuple(n for n in names if n in BASE_RUNS)}
    out.update({n: (n,) for n in names if n not in BASE_RUNS})
    return out


def _host(folder: Path) -> str:
    """The call's host.txt (`bench/cluster_call.sh`), "" when it has none."""
    found = sorted(folder.rglob("host.txt"))
    return found[0].read_text() if found else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("call", type=Path, help="cluster-call.tgz, or the folder it unpacks to")
    args = ap.parse_args()
    if args.call.is_file():
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(args.call) as tar:
            tar.extractall(tmp, filter="data")
            print(report(rows_of(Path(tmp)), _host(Path(tmp))))
    else:
        print(report(rows_of(args.call), _host(args.call)))


if __name__ == "__main__":
    main()
