"""One line a phase of `bench/rtload_bench.py`'s JSON: what rt_load.py saw, the batches, the GPU's use, the stages.

For each phase: offered rate, answered, lost, duplicates, shed, latency p50 / p99 / max (ms, the client's), the
daemon's mean batch over the phase (its cumulative ``rtsearch_batch_size`` counters, differenced against the same
daemon's previous phase), the GPU's mean use over the phase's wall span (``gpu_use.csv`` beside the JSON, as
``bench/gpu_check.sh rtload`` writes it), the cores kept busy over that span by the whole host (client included)
and by the daemon's processes, and the phase's stage means (``stage_ms``: `bench.serving.stage_means`).

    python bench/rtload_summary.py OUT/rtload.json [--gpu-use OUT/gpu_use.csv] [--cpu]

``--cpu`` adds, under each phase, the daemon's CPU µs an answered spectrum by kind of process (intake, lane,
engine, the front…: its threads' CPU seconds over the phase, as ``rtload_bench`` records them). A phase measured
with ``rtload_bench.py --tap`` also shows the latency a second, lighter subscriber saw (`bench/results_tap.py`).

With several JSON files (calls) and ``--group NAME=LABEL,LABEL`` (repeatable), it prints instead each group's
daemon p99 at each offered rate over every file, with the median: variants that stand for one setting under several
labels, measured across calls (a daemon's label is the ``[...]`` of its phase's name, else its checkout's name); a
group named with ``tap`` collects the lighter subscriber's p99s (``rtload_bench.py --tap``) instead of the client's.

    python bench/rtload_summary.py call3/rtload.json call4/rtload.json --group 1ms=lanes4,lanes4b --group 2ms=fl2
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.serving import metric_total  # noqa: E402


def gpu_use(path: Path) -> list[tuple[float, float]]:
    """``(unix time, use %)`` of each row of nvidia-smi's CSV (``timestamp, index, utilization.gpu, memory.used``)."""
    out = []
    with path.open() as f:
        for row in list(csv.reader(f))[1:]:
            when = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
            out.append((when.replace(tzinfo=datetime.UTC).timestamp(), float(row[2].split()[0])))
    return out


def rows(phases: list[dict[str, Any]], use: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """Each phase's figures (see the module docstring)."""
    out, seen = [], {}  # daemon → (batches, spectra) at its previous phase
    for p in phases:
        daemon = p["phase"].split(" ", 1)[-1]
        m = p.get("daemon_metrics") or {}
        counts = (metric_total(m, "rtsearch_batch_size_count"), metric_total(m, "rtsearch_batch_size_sum"))
        before = seen.get(daemon, (0.0, 0.0))
        if counts[0] < before[0]:  # the same name again: another daemon, counted from 0
            before = (0.0, 0.0)
        seen[daemon] = counts
        batches, spectra = counts[0] - before[0], counts[1] - before[1]
        start, end = p["wall"]
        during = [u for t, u in use if start <= t <= end]
        lat = p["latency_ms"]
        host = p.get("host_busy_cores")
        out.append({
            "phase": p["phase"], "offered": p["offered_hz"], "answered": p["answered"], "lost": p["lost"],
            "duplicates": p["duplicates"], "shed": p["statuses"].get("shed", 0), "p50": lat["p50"],
            "p99": lat["p99"], "max": lat["max"], "batch": round(spectra / batches, 1) if batches else None,
            "gpu_use": round(sum(during) / len(during), 1) if during else None, "stage_ms": p.get("stage_ms", {}),
            "host_cores": f"{host[0]}/{host[1]}" if host else None,
            "daemon_cores": round(sum(p["cpu_s"].values()) / (end - start), 2) if p.get("cpu_s") and end > start
            else None,
            "cpu_us": cpu_per_spectrum(p.get("cpu_s") or {}, p["answered"]),
            "tap": p.get("tap_ms") or {},
        })  # fmt: skip
    return out


def cpu_per_spectrum(cpu_s: dict[str, float], answered: int) -> dict[str, float]:
    """The daemon's CPU µs an answered spectrum by kind of process (``lane_0``, ``lane_1``… as ``lane``; the front or
    lone daemon is ``daemon``), from a phase's ``cpu_s`` (``process/thread``: CPU seconds), costliest first."""
    kinds: dict[str, float] = {}
    for key, seconds in cpu_s.items():
        kind = re.sub(r"_\d+$", "", key.split("/", 1)[0])
        kinds[kind] = kinds.get(kind, 0.0) + seconds
    return {k: round(v / answered * 1e6, 1) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])} if answered \
        else {}  # fmt: skip


def grouped(calls: list[list[dict[str, Any]]], groups: dict[str, set[str]]) -> dict[tuple[str, float], list[float]]:
    """Each group's daemon p99s (ms) at each offered rate, call after call in order: ``groups`` names the variant
    labels (``daemon main[LABEL]``), or for a daemon without one its checkout's name (``daemon base``: ``base``), that
    stand for one setting. With ``tap`` in a group's name, the lighter subscriber's p99s (``tap_ms``) instead."""
    out: dict[tuple[str, float], list[float]] = {}
    for phases in calls:
        for p in phases:
            name = p["phase"]
            if not name.startswith("daemon "):
                continue
            label = name[name.index("[") + 1 : name.rindex("]")] if "[" in name else name.split(" ", 1)[1]
            for group, labels in groups.items():
                p99 = (p.get("tap_ms") or {}).get("sent_p99") if "tap" in group else p["latency_ms"]["p99"]
                if label in labels and p99 is not None:
                    out.setdefault((group, p["offered_hz"]), []).append(p99)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", type=Path, nargs="+")
    ap.add_argument("--gpu-use", type=Path, help="nvidia-smi's CSV (default: gpu_use.csv beside the JSON, if there)")
    ap.add_argument("--group", action="append", default=[], metavar="NAME=LABEL,LABEL",
                    help="variant labels standing for one setting (then: each group's p99s and median a rate)")
    ap.add_argument("--cpu", action="store_true",
                    help="also the daemon's CPU µs an answered spectrum by kind of process, under each phase's line")
    args = ap.parse_args()
    if args.group:
        groups = {g.split("=", 1)[0]: set(g.split("=", 1)[1].split(",")) for g in args.group if "=" in g}
        found = grouped([json.loads(f.read_text())["phases"] for f in args.json], groups)
        for (group, rate), p99 in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            print(f"{group:10s} {rate:>9,.0f}/s p99 median {statistics.median(p99):8.1f} ms of {len(p99)}: "
                  f"{', '.join(f'{v:.1f}' for v in p99)}")
        return 0
    if len(args.json) > 1:
        ap.error("several JSON files need --group")
    csv_path = args.gpu_use or args.json[0].with_name("gpu_use.csv")
    use = gpu_use(csv_path) if csv_path.exists() else []
    for r in rows(json.loads(args.json[0].read_text())["phases"], use):
        stages = " ".join(f"{k} {v}" for k, v in r["stage_ms"].items())
        print(f"{r['phase']:24s} {r['offered']:>8,.0f}/s answered {r['answered']:>9,} lost {r['lost']} dup "
              f"{r['duplicates']} shed {r['shed']:>7,} p50 {r['p50']:>8} p99 {r['p99']:>8} max {r['max']:>8} "
              f"batch {r['batch']} gpu {r['gpu_use']} % cores {r['host_cores']} daemon {r['daemon_cores']} "
              f"| {stages}")  # fmt: skip
        if (t := r["tap"]).get("n"):  # the lighter subscriber's view (rtload_bench.py --tap)
            print(f"    tap ({t['n']:,} answers): sent → tap p50 {t.get('sent_p50')} p99 {t.get('sent_p99')} ms, "
                  f"published → tap p50 {t.get('published_p50')} p99 {t.get('published_p99')} ms")
        if args.cpu and r["cpu_us"]:
            print("    CPU µs a spectrum: " + ", ".join(f"{k} {v}" for k, v in r["cpu_us"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
