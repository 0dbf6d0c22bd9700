"""The daemon's latency, throughput and overload, measured by the shared client beside the echo floor.

On free loopback ports, one after the other, each under ``rt_load.py --senders N`` (the dev runs' MS2 spectra,
`bench.harness.dev_spectra`):

1. ``echo_floor.py`` at ``--floor-rates``: what no Python service on this machine beats;
2. ``rtsearch serve`` on the bench index (20,000 proteins with entrapment, `bench.harness.bench_index`) at
   ``--rates``; with ``--overload R``, R spectra/s for ``--overload-seconds`` with a ``--overload-budget-ms``
   budget, then 200/s again: latency comes back and nothing is lost. ``--variant LABEL=ARGS`` measures the same
   checkout with other ``rtsearch serve`` arguments (``--lanes 4``, say); ``--code DIR[=ARGS]`` another checkout too
   (before a change; ARGS as a variant's), in the same call.

Prints a table (one row a phase: offered rate, answered, lost, duplicates, shed, p50 / p99 / max ms, the daemon's
mean batch, where a spectrum's time went inside the daemon) and writes every phase to ``--json``. ``--tools``: a
copy of ``../shared/tools`` (the GPU machine has no ``../shared``).

    python3 bench/daemon.py --data ../shared/data --tools ../shared/tools --rates 200,10000,20000 \\
        --overload 100000 --variant lanes4=--lanes,4 --json daemon.json
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import ROOT, bench_index, dev_spectra, emit, inputs, write_mgf  # noqa: E402
from bench.served import (  # noqa: E402
    Served,
    busy_cores,
    daemon_metrics,
    echo_floor,
    host_ticks,
    metric_total,
    rt_load,
    stage_means,
)


def table(phases: list[dict[str, Any]]) -> str:
    """One line a phase (see the module docstring)."""
    lines = [f"{'phase':<28}{'offered/s':>10}{'answered':>10}{'lost':>6}{'dup':>5}{'shed':>8}{'p50 ms':>8}"
             f"{'p99 ms':>8}{'max ms':>8}{'batch':>7}  stages (ms)"]  # fmt: skip
    for p in phases:
        lat, m, before = p["latency_ms"], p.get("metrics") or {}, p.get("metrics_before") or {}
        batches = metric_total(m, "rtsearch_batch_size_count") - metric_total(before, "rtsearch_batch_size_count")
        spectra = metric_total(m, "rtsearch_batch_size_sum") - metric_total(before, "rtsearch_batch_size_sum")
        shed = p["statuses"].get("shed", 0)
        stages = " ".join(f"{k} {v:g}" for k, v in p.get("stage_ms", {}).items())
        lines.append(f"{p['phase']:<28}{p['offered_hz']:>10,.0f}{p['answered']:>10,}{p['lost']:>6}{p['duplicates']:>5}"
                     f"{shed:>8,}{lat['p50'] or 0:>8.2f}{lat['p99'] or 0:>8.2f}{lat['max'] or 0:>8.1f}"
                     f"{(spectra / batches if batches else 0):>7.1f}  {stages}")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    inputs(p, spectra=None)
    p.add_argument("--tools", type=Path, required=True, help="a folder holding rt_load.py and echo_floor.py")
    p.add_argument("--rates", default="200,10000,20000", help="the daemon's offered rates, spectra/s")
    p.add_argument("--floor-rates", default="200,20000", help="the echo floor's rates ('': none)")
    p.add_argument("--senders", type=int, default=4)
    p.add_argument("--seconds", type=float, default=10.0, help="seconds of each phase above 1,000/s")
    p.add_argument("--low-seconds", type=float, default=30.0, help="seconds of each phase at 1,000/s or less")
    p.add_argument("--budget-ms", type=float, default=0.0, help="budget_ms sent with each spectrum (0: none)")
    p.add_argument("--overload", type=float, default=0.0, help="an overload phase at this rate (0: none)")
    p.add_argument("--overload-seconds", type=float, default=10.0)
    p.add_argument("--overload-budget-ms", type=float, default=100.0, help="budget_ms of the overload phase")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL=ARGS",
                   help="this checkout with these rtsearch serve arguments, comma-separated (repeatable)")
    p.add_argument("--code", action="append", default=[], metavar="DIR[=ARGS]",
                   help="another checkout measured the same way after this one, with ARGS as --variant's (repeatable: "
                   "the same checkout with and without --lanes 4, say)")  # fmt: skip
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    index, res = bench_index(args.data, args.proteins, args.index_cache)
    del index
    phases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        mgf = tmp / "spectra.mgf"
        res["spectra"] = write_mgf(dev_spectra(args.data), mgf)

        def phase(tag: str, rate: float, seconds: float, ep: tuple[str, str], budget_ms: float, port: int = 0) -> None:
            m0, h0 = (daemon_metrics(port) if port else {}), host_ticks()
            extra = ["--budget-ms", str(budget_ms)] if budget_ms else []
            for line in rt_load(args.tools, mgf, *ep, "--rates", str(rate), "--seconds", str(seconds), "--senders",
                                str(args.senders), "--tag", tag.replace(" ", "-"), *extra):  # fmt: skip
                line.update(phase=tag, host_busy_cores=[busy_cores(h0, host_ticks()), os.cpu_count()])
                if port:
                    line.update(metrics_before=m0, metrics=daemon_metrics(port))
                    line["stage_ms"] = stage_means(m0, line["metrics"])
                phases.append(line)
                print(table([line]).splitlines()[1], flush=True)

        def seconds(rate: float) -> float:
            return args.low_seconds if rate <= 1000 else args.seconds

        with echo_floor(args.tools) as ep:
            for rate in (float(r) for r in args.floor_rates.split(",") if r):
                phase("echo floor", rate, seconds(rate), ep, 0.0)
        daemons = [(ROOT, "", "")] + [(ROOT, *v.split("=", 1)) for v in args.variant]
        for given in args.code:
            where, _, extra = given.partition("=")
            label = extra.replace(",", " ").split()[0].lstrip("-") if extra else ""
            daemons.append((Path(where).resolve(), label, extra))
        for code, label, extra in daemons:
            name = (code.name if code != ROOT else "this") + (f" [{label}]" if label else "")
            with Served(args.index_cache.resolve(), tmp / f"res-{len(phases)}", extra.replace(",", " ").split(), tmp,
                        code=code) as served:  # fmt: skip
                ep = (served.spectra, served.results)
                for rate in (float(r) for r in args.rates.split(",")):
                    phase(name, rate, seconds(rate), ep, args.budget_ms, served.port)
                if args.overload:
                    phase(f"{name} overload", args.overload, args.overload_seconds, ep, args.overload_budget_ms,
                          served.port)  # fmt: skip
                    phase(f"{name} after", 200, 5.0, ep, args.budget_ms, served.port)
            time.sleep(0.5)
    print(table(phases), flush=True)
    for line in phases:
        line.pop("metrics_before", None)
    res["phases"] = phases
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
