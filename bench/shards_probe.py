"""Would runs spread over daemon processes pay? K whole daemons side by side, each fed its own runs.

Issue 16's throughput goal is bounded by the daemon's one process (one GIL for the event loop, the engine
thread and the results thread: bench/RESULTS.md). Runs are independent (each its own q-values and file),
so runs spread over K daemon processes would multiply what the shell can do — if the machine's cores, the
one GPU shared by K engine processes and the client allow it. This measures that ceiling before building
it: K ``rtsearch serve`` processes (each its own ports and engine process) on the 20,000-protein index, and
K copies of the shared client ``rt_load.py`` at once, copy k sending ``--senders / K`` runs at ``rate / K``
to daemon k. Per rate: the sum of what was sent, answered, lost and answered twice, and the worst p99 and max
of the K clients (the pooled p99 is at most that). Optimistic against one front door routing runs to K
daemons: no routing hop, and K receiving clients instead of one.

    python3 bench/shards_probe.py --data .gpudata/data --tools .gpudata/tools --index-cache .benchcache/idx20k \\
        --shards 1,2,4 --rates 20000,40000,80000 --senders 4 --seconds 6
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from bench.rtload_bench import write_mgf  # noqa: E402
from bench.serving import Served, cpu_by_thread, index_and_record  # noqa: E402


def clients(tools: Path, mgf: Path, served: list[Served], rate: float, senders: int, seconds: float,
            extra: list[str]) -> list[dict[str, Any]]:  # fmt: skip
    """One ``rt_load.py`` a daemon, all at once; their JSON lines (one each)."""
    k = len(served)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(tools / "rt_load.py"),
                str(mgf),
                "--spectra",
                s.spectra,
                "--results",
                s.results,
                "--rates",
                str(rate / k),
                "--seconds",
                str(seconds),
                "--senders",
                str(max(1, senders // k)),
                "--tag",
                f"k{k}-d{i}",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i, s in enumerate(served)
    ]
    lines = []
    for p in procs:
        out, err = p.communicate()
        got = [json.loads(x) for x in out.splitlines() if x.startswith("{") and "offered_hz" in x]
        if not got:
            print(err[-2000:], file=sys.stderr)
        lines.extend(got)
    return lines


def pooled(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The K clients' lines as one: sums, and the worst latencies."""
    lat = [x["latency_ms"] for x in lines]
    statuses: dict[str, int] = {}
    for x in lines:
        for s, n in x["statuses"].items():
            statuses[s] = statuses.get(s, 0) + n
    worst = {q: max((v[q] for v in lat if v[q] is not None), default=None) for q in ("p50", "p99", "max")}
    return {"sent": sum(x["sent"] for x in lines), "answered": sum(x["answered"] for x in lines),
            "lost": sum(x["lost"] for x in lines), "duplicates": sum(x["duplicates"] for x in lines),
            "statuses": statuses, "worst_latency_ms": worst,
            "results_per_s": round(sum(x["results_per_s"] or 0 for x in lines), 1)}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--tools", type=Path, required=True, help="folder holding rt_load.py")
    p.add_argument("--index-cache", type=Path, required=True)
    p.add_argument("--proteins", type=int, default=20_000)
    p.add_argument("--shards", default="1,2,4", help="daemon processes side by side, one count after the other")
    p.add_argument("--rates", default="20000,40000,80000", help="spectra/s offered in all")
    p.add_argument("--senders", type=int, default=4, help="runs in all (each client sends senders / K of them)")
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--budget-ms", type=float, default=0.0)
    p.add_argument("--serve-args", default="", help="extra arguments of each rtsearch serve")
    p.add_argument("--intakes", type=int, default=4, help="intake processes in all: each daemon gets intakes / K")
    p.add_argument("--lanes", action="store_true",
                   help="instead of K daemons, one `rtsearch serve --lanes K` (--intakes intake processes in front), "
                   "the K clients all sending to it: what the front costs against K daemons side by side")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    _, res, index = index_and_record(args.data, args.proteins, args.index_cache)
    del index
    extra = ["--budget-ms", str(args.budget_ms)] if args.budget_ms else []
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        mgf = tmp / "spectra.mgf"
        res["spectra"] = write_mgf(args.data, mgf)
        for k in map(int, args.shards.split(",")):
            with contextlib.ExitStack() as stack:
                serve = [*args.serve_args.split(), "--intakes", str(args.intakes if args.lanes else
                                                                    max(1, args.intakes // k))]  # fmt: skip
                if args.lanes:  # the front's intake processes hand every lane its runs
                    front = Served(args.index_cache.resolve(), tmp / f"res-l{k}", [*serve, "--lanes", str(k)], tmp)
                    served = [front] * k
                else:
                    served = [Served(args.index_cache.resolve(), tmp / f"res-k{k}-{i}", serve, tmp) for i in range(k)]
                for s in dict.fromkeys(served):  # started together, waited for one by one
                    stack.enter_context(s)
                for rate in map(float, args.rates.split(",")):
                    cpu0 = [sum(cpu_by_thread(s.proc.pid).values()) for s in served]
                    lines = clients(args.tools, mgf, served, rate, args.senders, args.seconds, extra)
                    cpu = [
                        round(sum(cpu_by_thread(s.proc.pid).values()) - c, 1) for s, c in zip(served, cpu0, strict=True)
                    ]
                    row = {"shards": k, "lanes": args.lanes, "offered_hz": rate, **pooled(lines), "daemon_cpu_s": cpu,
                           "clients": lines}
                    rows.append(row)
                    print(json.dumps({x: v for x, v in row.items() if x != "clients"}), flush=True)
    res["rows"] = rows
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
