"""The daemon's resident memory over a long steady load: flat (within 10 %) over 10 minutes at half its highest
rate?

``rtsearch serve --spectra-mode pull`` on the bench index (`bench.harness.bench_index`), fed by
the shared client ``rt_load.py`` at ``--rate`` in back-to-back phases of ``--phase-seconds`` (each phase its own
``--senders`` runs, started and ended: a run's state must go when it ends) for ``--minutes``; every ``--sample-s`` a
thread here reads the memory of the daemon and of every process under it (``/proc/PID/smaps_rollup``: RSS, and PSS,
which splits pages shared by forked processes between them, so that the sum counts each page once, and its
heap part ``Pss_Anon``, which leaves out the pages of mapped files such as the index; GPU memory is
in neither: each GPU's, from ``nvidia-smi``, is sampled beside).

The verdict compares the first sample after ``--warm-phases`` phases (warm: kernels compiled, buffers grown, the
first runs ended and finished) with every later one: ``growth`` = the largest later PSS sum over it, less 1 (issue 16
asks ≤ 0.10). A run's PSMs are held until it ends (its final FDR needs them all), so the memory rises within a
phase and falls when its runs end (and are finished in the refit processes): the phases' length sets the teeth,
which ``growth`` counts; ``trend_growth`` = the largest median PSS of a later minute over the first minute's median,
less 1, follows the level between them; ``trough_growth`` and ``peak_growth`` the same of each minute's least and
largest sample (the teeth's floor and tops). Each phase's client line (answered, lost, duplicates,
p99) and each sample are printed as they come: memory held flat by losing spectra would not count.

    python3 bench/soak.py --data ../shared/data --tools ../shared/tools --rate 30000 --minutes 10 --json soak.json
    python3 bench/soak.py --verdict soak.json [--warm-phases N]   # a saved soak judged again, no load
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import bench_index, dev_spectra, emit, inputs, write_mgf  # noqa: E402
from bench.served import Served, memory_kb, process_tree, processes, rt_load  # noqa: E402


def sample(pid: int) -> dict[str, Any]:
    """The daemon tree's memory now: sums in MB, and each process's PSS (MB) by name."""
    each, anon, own = {}, {}, {}
    rss = pss = 0
    table = processes()
    for p in process_tree(pid, table):
        name = table.get(p, (0, "?"))[1]
        m = memory_kb(p)
        rss, pss = rss + m.get("rss", 0), pss + m.get("pss", 0)
        key = name if name not in each else f"{name}#{p}"
        each[key], anon[key] = round(m.get("pss", 0) / 1024, 1), round(m.get("pss_anon", 0) / 1024, 1)
        own[key] = round(m.get("rss", 0) / 1024, 1)  # a shared page's PSS share rises when another process drops it
    return {"t": round(time.time(), 1), "rss_mb": round(rss / 1024, 1), "pss_mb": round(pss / 1024, 1), "each": each,
            "anon_mb": round(sum(anon.values()), 1), "anon": anon, "rss": own, "gpu_mb": gpu_mb()}


def gpu_mb() -> list[int]:
    """Each GPU's memory in use (MB, ``nvidia-smi``; empty without one): a pool that grows is not in RSS."""
    if not shutil.which("nvidia-smi"):
        return []
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    return [int(x) for x in out.stdout.split() if x.isdigit()]


def verdict(samples: list[dict[str, Any]], warm_t: float) -> dict[str, Any]:
    """Growth of the PSS sum over the first sample at or after ``warm_t`` (the end of the first phase), and of each
    minute's median, trough and peak over the first minute's (a run's end lifts the memory for the seconds it is
    finished, and a run's PSMs are held until it ends: the teeth; a leak shows as a trend of all three)."""
    later = [s for s in samples if s["t"] >= warm_t]
    if len(later) < 2:
        return {"growth": None, "why": "fewer than two samples after the first phase"}
    base, peak, last = later[0]["pss_mb"], max(s["pss_mb"] for s in later), later[-1]["pss_mb"]
    anon = [s.get("anon_mb", 0.0) for s in later]  # the heaps' part alone (no mapped file's pages)
    troughs, minutes, peaks = minute_stats(later)
    return {"warm_pss_mb": base, "peak_pss_mb": peak, "last_pss_mb": last, "growth": round(peak / base - 1, 4),
            "minute_median_pss_mb": minutes, "trend_growth": round(max(minutes) / minutes[0] - 1, 4),
            "minute_trough_pss_mb": troughs, "trough_growth": round(max(troughs) / troughs[0] - 1, 4),
            "minute_peak_pss_mb": peaks, "peak_growth": round(max(peaks) / peaks[0] - 1, 4),
            "last_growth": round(last / base - 1, 4),
            "minutes_watched": round((later[-1]["t"] - later[0]["t"]) / 60, 2),
            "warm_rss_mb": later[0]["rss_mb"], "peak_rss_mb": max(s["rss_mb"] for s in later),
            "warm_anon_mb": anon[0], "peak_anon_mb": max(anon), "last_anon_mb": anon[-1]}  # fmt: skip


def minute_stats(samples: list[dict[str, Any]]) -> tuple[list[float], list[float], list[float]]:
    """The least, median and largest PSS sum of each whole minute of ``samples`` from the first (a last part minute
    holding fewer than half a minute's samples left out: one sample is no minute's level). The medians follow the
    level between the teeth, the troughs and peaks their floor and tops."""
    t0, by_minute = samples[0]["t"], {}
    for s in samples:
        by_minute.setdefault(int((s["t"] - t0) // 60), []).append(s["pss_mb"])
    runs = [v for _, v in sorted(by_minute.items())]
    if len(runs) > 1 and 2 * len(runs[-1]) < len(runs[0]):
        runs = runs[:-1]
    return ([round(min(v), 1) for v in runs], [round(statistics.median(v), 1) for v in runs],
            [round(max(v), 1) for v in runs])  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    inputs(ap, spectra=None)
    ap.add_argument("--tools", type=Path, required=True, help="folder holding rt_load.py")
    ap.add_argument("--rate", type=float, required=True, help="spectra/s offered (half the highest measured, say)")
    ap.add_argument("--minutes", type=float, default=10.0, help="how long the load lasts")
    ap.add_argument("--phase-seconds", type=float, default=60.0, help="each client run's length (new runs each)")
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--warm-phases", type=int, default=2, help="phases before the verdict's first sample (the first "
                    "runs' ends, and their final FDR in the refit process, grow the memory once)")
    ap.add_argument("--serve-args", default="", help="extra rtsearch serve arguments")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--verdict", type=Path, metavar="SOAK_JSON",
                    help="only: print the verdict of a soak saved with --json (its samples and phases), run no load")
    if "--verdict" in sys.argv:  # no data or tools needed to read a saved soak again
        again = argparse.ArgumentParser()
        again.add_argument("--verdict", type=Path, required=True)
        again.add_argument("--warm-phases", type=int, help="default: the soak's own (2 where it did not say)")
        v, _ = again.parse_known_args()
        saved = json.loads(v.verdict.read_text())
        warm_phases = v.warm_phases or saved.get("warm_phases", 2)
        warm = saved["phases"][warm_phases - 1]["t"] if len(saved.get("phases", [])) >= warm_phases else 0.0
        print(json.dumps(verdict(saved["samples"], warm)))
        return 0
    a = ap.parse_args()
    index, res = bench_index(a.data, a.proteins, a.index_cache)
    del index
    res.update(rate=a.rate, minutes=a.minutes, phase_seconds=a.phase_seconds, senders=a.senders,
               warm_phases=a.warm_phases)
    samples: list[dict[str, Any]] = []
    phases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        mgf = tmp / "spectra.mgf"
        res["spectra"] = write_mgf(dev_spectra(a.data), mgf)
        with Served(a.index_cache.resolve(), tmp / "results", a.serve_args.split(), tmp) as served:
            stop = threading.Event()

            def watch() -> None:  # each sample printed too: a call cut short still tells what it saw
                while not stop.is_set():
                    samples.append(sample(served.proc.pid))
                    print(json.dumps({"sample": samples[-1]}), flush=True)
                    stop.wait(a.sample_s)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            end = time.monotonic() + a.minutes * 60
            warm_t, k = 0.0, 0
            while time.monotonic() < end:
                seconds = min(a.phase_seconds, max(1.0, end - time.monotonic()))
                for line in rt_load(a.tools, mgf, served.spectra, served.results, "--rates", str(a.rate), "--seconds",
                                    str(seconds), "--senders", str(a.senders), "--tag", f"soak-p{k}"):  # fmt: skip
                    line.update(phase=k, t=round(time.time(), 1), pss_mb=samples[-1]["pss_mb"] if samples else None)
                    phases.append(line)
                    print(json.dumps({x: line[x] for x in ("phase", "offered_hz", "sent", "answered", "lost",
                                                           "duplicates", "statuses", "latency_ms", "pss_mb")}),
                          flush=True)  # fmt: skip
                k += 1
                warm_t = warm_t or (time.time() if k == a.warm_phases else 0.0)
            samples.append(sample(served.proc.pid))
            stop.set()
            watcher.join(a.sample_s + 5)
    res.update(samples=samples, phases=phases, verdict=verdict(samples, warm_t),
               lost=sum(p["lost"] for p in phases), duplicates=sum(p["duplicates"] for p in phases))
    print(json.dumps({"verdict": res["verdict"], "lost": res["lost"], "duplicates": res["duplicates"],
                      "first": samples[0]["each"] if samples else {}, "last": samples[-1]["each"] if samples else {}}))
    emit(res, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
