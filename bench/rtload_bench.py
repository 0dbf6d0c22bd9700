"""The daemon measured by the shared, independent protocol-v1 client, beside the echo floor of the same machine.

Builds (or loads) the 20,000-protein index with entrapment of `bench/stream_bench.py`, writes the dev
runs' MS2 spectra with a known charge as MGF (what ``rt_load.py`` reads), then, on free loopback ports:

1. ``echo_floor.py`` (a Python service answering each message at once, no scoring) under ``rt_load.py``
   at ``--floor-rates`` — the latency no Python service on this machine beats; with ``--wide-rates``,
   ``bench/wide_echo.py`` (the same answers from ``--wide-workers`` processes) at those rates: the
   client's own ceiling, where the one-process floor falls behind;
2. ``rtsearch serve --spectra-mode pull`` on the index under ``rt_load.py --senders N`` at ``--rates``,
   then, with ``--overload R``, R spectra/s for ``--overload-seconds`` with ``--overload-budget-ms``,
   then 200/s again to see latency come back. ``--variant LABEL=ARGS`` (repeatable) measures the same
   checkout with other ``rtsearch serve`` arguments, one daemon after the other.

With ``--tap`` a second, lighter subscriber (`bench/results_tap.py`) listens beside the client in every phase and
its view of the latency is added to the phase's line (``tap_ms``): the client's one collecting process falls behind
at 80,000-100,000 answers a second, and this tells its queue from the daemon's.

Prints and writes (``--json``) every ``rt_load.py`` line, tagged. The tools come from ``--tools``
(a copy of ``../shared/tools``; the GPU machine has no ``../shared``).

    python3 bench/rtload_bench.py --data .gpudata/data --tools .gpudata/tools --index-cache .benchcache/idx20k \\
        --rates 200,10000,20000,40000 --senders 4 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from bench.results_tap import tap_latency  # noqa: E402
from bench.serving import (  # noqa: E402
    Served,
    busy_cores,
    cpu_by_thread,
    daemon_metrics,
    echo_floor,
    free_port,
    host_ticks,
    index_and_record,
    processes,
    stage_means,
)
from bench.serving import write_mgf as write_spectra  # noqa: E402
from bench.stream_bench import RUNS  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402


def write_mgf(data: Path, out: Path) -> int:
    """The dev runs' MS2 spectra with one known charge, as MGF; how many."""
    return write_spectra(itertools.chain.from_iterable(read_spectra(data / run) for run in RUNS), out)


def rt_load(tools: Path, mgf: Path, spectra: str, results: str, *args: str) -> list[dict[str, Any]]:
    """Run the client; its JSON lines."""
    out = subprocess.run([sys.executable, str(tools / "rt_load.py"), str(mgf), "--spectra", spectra, "--results",
                          results, *args], capture_output=True, text=True, check=False)  # fmt: skip
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    if out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
    return [x for x in lines if "offered_hz" in x]


def daemon(code: Path, tmp: Path, phase: Any, args: argparse.Namespace, label: str = "", extra: str = "") -> None:
    """The phases against ``rtsearch serve`` of the checkout ``code`` (with ``extra`` arguments), tagged with its
    folder's name and ``label``."""
    name = code.name + (f"[{label}]" if label else "")
    env = dict(w.split("=", 1) for w in extra.split() if w[:1].isupper() and "=" in w)  # VAR=value: the daemon's
    serve = [w for w in extra.split() if not (w[:1].isupper() and "=" in w)]
    with Served(args.index_cache.resolve(), tmp / f"res-{code.name}{label}", [*args.serve_args.split(), *serve],
                tmp, code=code, env=env) as served:  # fmt: skip
        ep, port, pid = (served.spectra, served.results), served.port, served.proc.pid
        if shutil.which("nvidia-smi"):  # where its engines are: each GPU's memory in use once it is ready
            smi = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader"],
                                 capture_output=True, text=True, check=False)  # fmt: skip
            print(f"GPU memory with {name} ready: {'; '.join(smi.stdout.split(chr(10))[:-1])}", flush=True)
        budget = ["--budget-ms", str(args.budget_ms)] if args.budget_ms else []
        for rate in args.rates.split(","):
            seconds = args.low_seconds if float(rate) <= 1000 else args.seconds
            # with lanes, lane 0 and its children recorded (the front's recording holds few of a lane's samples)
            # with lanes, the first of each kind named by --py-spy-procs and its children recorded, each by itself
            spied = {k: v for prefix in args.py_spy_procs.split(",")
                     for k, v in sorted(child_pids(pid, prefix).items())[:1]} or {"": pid}  # fmt: skip
            spies = [py_spy(p, seconds, args.out / f"py-spy-{code.name}{label}{k}-{rate}.txt", args.py_spy_mode,
                            args.py_spy_rate)
                     for k, p in spied.items()] if rate in args.py_spy.split(",") else []  # fmt: skip
            phase(f"daemon {name}", rate, seconds, *budget, ep=ep, port=port, pid=pid)
            for spy in spies:
                spy.wait(60)
        if args.overload:
            tight = ["--budget-ms", str(args.overload_budget_ms)] if args.overload_budget_ms else budget
            phase(f"overload {name}", str(args.overload), args.overload_seconds, *tight, ep=ep, port=port, pid=pid)
            phase(f"after {name}", "200", 5.0, *budget, ep=ep, port=port)
    time.sleep(0.5)  # the stopped daemon's last lines read by `Served`'s reader thread
    (args.out / f"serve-{code.name}{label}.log").write_text("".join(served.log))


def py_spy(pid: int, seconds: float, out: Path, mode: str = "gil", rate: int = 0) -> subprocess.Popen[bytes]:
    """``py-spy record`` of the daemon and its child processes for ``seconds`` from now (begun 1 s into the phase,
    ended a second before it: at least 1 s), as collapsed stacks in ``out``: ``mode`` "gil" samples only the thread
    holding each process's GIL, "idle" every thread, waiting or not (where a thread waits, for the GIL among others),
    "native" that with C frames; ``rate``: samples a second (0: 50 with C frames, else 200)."""
    places = [Path(sys.executable).parent, *(Path(d) / "bin" for d in sys.path)]  # a venv's, or pip --target's
    found = [d / "py-spy" for d in places if (d / "py-spy").exists()]
    # with C frames py-spy falls behind at 200 samples a second over every process: the daemon's own, 50 a second
    how = {"gil": ["--gil", "--subprocesses"], "idle": ["--idle", "--subprocesses"], "native": ["--idle", "--native"]}
    rate = rate or (50 if mode == "native" else 200)
    span = max(1, int(seconds) - (2 if seconds > 3 else 1))
    cmd = [str(found[0]) if found else "py-spy", "record", *how[mode],
           "--threads", "--format", "raw", "--rate", str(rate), "-d", str(span),
           "-o", str(out), "-p", str(pid)]
    return subprocess.Popen(["sh", "-c", f"sleep 1; exec {' '.join(cmd)}"])


def child_pids(front: int, prefix: str = "lane") -> dict[str, int]:
    """``front``'s child processes whose names start with ``prefix`` (`rtsearch serve --lanes`: lanes ``lane_K``,
    intake processes ``intake_K``), by name: each is recorded by itself (`py_spy` of the front with
    ``--subprocesses`` gave five samples of 3 s at 13,000 /s, all of the front's, bench/RESULTS.md 2026-11-27 16:55)."""
    return {name: pid for pid, (parent, name) in processes().items() if parent == front and name.startswith(prefix)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--tools", type=Path, required=True, help="folder holding rt_load.py and echo_floor.py")
    p.add_argument("--index-cache", type=Path, required=True)
    p.add_argument("--proteins", type=int, default=20_000)
    p.add_argument("--rates", default="200,10000,20000,40000")
    p.add_argument("--floor-rates", default="200,20000", help="the echo floor's rates ('': none)")
    p.add_argument("--wide-rates", default="", help="rates for bench/wide_echo.py (none by default)")
    p.add_argument("--wide-workers", default="8", metavar="N[,N...]",
                   help="the wide echo's worker processes; several: each measured with every --wide-io-threads")
    p.add_argument("--wide-io-threads", default="1", metavar="N[,N...]",
                   help="the wide echo's front ZeroMQ I/O threads; several: each measured at every --wide-rates")
    p.add_argument("--senders", type=int, default=4)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--low-seconds", type=float, default=30.0, help="seconds of the 200/s phases")
    p.add_argument("--budget-ms", type=float, default=0.0, help="budget_ms sent with each spectrum (0: none)")
    p.add_argument("--overload", type=float, default=0.0, help="an overload phase at this rate (0: none)")
    p.add_argument("--overload-seconds", type=float, default=10.0)
    p.add_argument("--overload-budget-ms", type=float, default=50.0, help="budget_ms of the overload phase")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL=ARGS",
                   help="measure this checkout with these rtsearch serve arguments, comma-separated (repeatable); "
                   "words VAR=value are the daemon's environment (CUDA_VISIBLE_DEVICES=0: one GPU of several)")
    p.add_argument("--serve-args", default="", help="extra arguments of rtsearch serve, e.g. '--workers 2'")
    p.add_argument("--code", type=Path, action="append",
                   help="the checkout whose daemon is measured (default this one); several: one after the other")
    p.add_argument("--py-spy", default="", metavar="RATES",
                   help="record the daemon with py-spy during the phases at these rates (comma-separated)")
    p.add_argument("--py-spy-procs", default="lane", metavar="PREFIXES",
                   help="with lanes, which of the front's child processes are recorded: the first whose name starts "
                   "with each comma-separated prefix (lane, intake), each with its children")
    p.add_argument("--py-spy-rate", type=int, default=0, metavar="HZ",
                   help="py-spy's samples a second (default: 200, 50 with C frames)")
    p.add_argument("--py-spy-mode", choices=("gil", "idle", "native"), default="gil",
                   help="gil: threads holding a GIL; idle: every thread, waiting too; native: C frames too")
    p.add_argument("--out", type=Path, default=Path("."), help="where the py-spy recordings go")
    p.add_argument("--tap", action="store_true",
                   help="a second, lighter subscriber beside the client (bench/results_tap.py): each phase's latency "
                   "as it sees it (tap_ms), to tell the daemon's delays from the client collector's")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    backend, res, index = index_and_record(args.data, args.proteins, args.index_cache)
    del index
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        mgf = tmp / "spectra.mgf"
        res["spectra"] = write_mgf(args.data, mgf)
        phases: list[dict[str, Any]] = []

        def phase(tag: str, rates: str, seconds: float, *extra: str, ep: tuple[str, str], port: int = 0,
                  pid: int = 0) -> None:
            cpu0 = cpu_by_thread(pid) if pid else {}
            m0 = daemon_metrics(port) if port else {}
            tap_file = tmp / f"tap-{len(phases)}.npy"
            tap = subprocess.Popen([sys.executable, str(ROOT / "bench" / "results_tap.py"), ep[1], str(tap_file)]) \
                if args.tap else None  # fmt: skip
            if tap is not None:
                time.sleep(0.3)  # subscribed before the client's first spectrum
            t0, h0 = time.time(), host_ticks()
            lines = rt_load(args.tools, mgf, *ep, "--rates", rates, "--seconds", str(seconds), "--senders",
                            str(args.senders), "--tag", tag.replace(" ", "-"), *extra)  # fmt: skip
            if tap is not None:
                tap.terminate()
                tap.wait(30)
            for line in lines:
                if tap is not None:  # the lighter subscriber's view of the same answers (bench/results_tap.py)
                    line["tap_ms"] = tap_latency(tap_file, t0, time.time())
                line["phase"], line["wall"] = tag, [round(t0, 2), round(time.time(), 2)]  # beside nvidia-smi's log
                line["host_busy_cores"] = [busy_cores(h0, host_ticks()), os.cpu_count()]  # client and daemon alike
                if port:
                    line["daemon_metrics"] = daemon_metrics(port)
                    line["stage_ms"] = stage_means(m0, line["daemon_metrics"])  # the phase's means, stage by stage
                if pid:  # CPU seconds of each daemon thread over the phase (rt_load's one line a phase)
                    cpu1 = cpu_by_thread(pid)
                    used = {k: v - cpu0.get(k, 0.0) for k, v in cpu1.items()}
                    line["cpu_s"] = {k: round(v, 2) for k, v in used.items() if v > 0.05}
                phases.append(line)
                print(json.dumps(line), flush=True)

        with echo_floor(args.tools) as ep:
            for rate in filter(None, args.floor_rates.split(",")):
                seconds = args.low_seconds if float(rate) <= 1000 else args.seconds
                phase("floor", rate, seconds, ep=ep)
        wides = [(w, io) for w in args.wide_workers.split(",") for io in args.wide_io_threads.split(",")]
        for workers, io in wides if args.wide_rates else ():
            sp, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
            wide = subprocess.Popen([sys.executable, str(ROOT / "bench" / "wide_echo.py"), "--spectra", sp,
                                     "--results", rp, "--workers", workers, "--io-threads", io])
            try:
                time.sleep(1.5)
                for rate in args.wide_rates.split(","):
                    phase(f"wide echo x{workers}" + (f" io{io}" if io != "1" else ""), rate, args.seconds,
                          ep=(sp, rp))  # fmt: skip
            finally:
                wide.terminate()
                wide.wait(10)
        variants = [tuple(v.split("=", 1)) for v in args.variant] or [("", "")]
        for code in args.code or [ROOT]:
            # other checkouts (before a change) run plainly: their CLI may lack the flags the variants give
            for label, extra in variants if code.resolve() == ROOT else [("", "")]:
                daemon(code.resolve(), tmp, phase, args, label, extra.replace(",", " "))
        res["phases"] = phases
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
