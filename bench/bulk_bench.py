"""Bulk replay through the daemon (batched topics) against the offline engine, same machine, same call.

One 50,000-spectrum run (the dev runs' MS2 spectra with one known charge, looped with new scan numbers,
written as MGF) against the 20,000-protein index with entrapment of `bench/stream_bench.py`:

1. the engine alone: ``Engine.score`` over the run's spectra in batches (``--engine-batches``), in this
   process — the offline engine's spectra/s without reading files;
2. ``rtsearch search RUN.mgf --index …``, the whole process timed (file reading included);
3. ``rtsearch serve --spectra-mode pull`` fed by ``rtsearch-sim replay RUN.mgf --rate max`` (``spectra``
   messages of ``--batches`` spectra, answers in ``batch.results``, a window of spectra in flight), the
   simulator's report: answered/s from the first spectrum sent to the last answer, lost, by status, latency.

Prints and writes (``--json``) the figures and the ratios daemon / engine and daemon / ``rtsearch search``.

    python3 bench/bulk_bench.py --data .gpudata/data --index-cache .benchcache/idx20k --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from bench.rtload_bench import py_spy  # noqa: E402
from bench.search_bench import time_engine  # noqa: E402
from bench.serving import (  # noqa: E402
    Served,
    bench_inputs,
    code_env,
    cpu_by_thread,
    daemon_metrics,
    index_and_record,
)
from bench.stream_bench import RUNS  # noqa: E402
from rtsearch.config import SearchConfig  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402


def looped_spectra(data: Path, n: int) -> list[Any]:
    """The dev runs' MS2 spectra with one known charge, looped into one run of ``n`` with scans 1..n."""
    pool = [sp for run in RUNS for sp in read_spectra(data / run)
            if len(sp.charges) == 1 and not sp.problem and sp.precursor_mz > 0]  # fmt: skip
    return [dataclasses.replace(pool[i % len(pool)], run="bulk", scan=i + 1) for i in range(n)]


def write_mgf(spectra: list[Any], out: Path) -> None:
    with open(out, "w") as fh:
        for sp in spectra:
            fh.write(f"BEGIN IONS\nTITLE=bulk.{sp.scan}\nSCANS={sp.scan}\nPEPMASS={sp.precursor_mz!r}\n"
                     f"CHARGE={sp.charges[0]}+\nRTINSECONDS={sp.rt!r}\n")  # fmt: skip
            fh.writelines(f"{m!r} {i!r}\n" for m, i in zip(sp.mz.tolist(), sp.intensity.tolist(), strict=True))
            fh.write("END IONS\n")


def offline(index: Path, mgf: Path, tmp: Path, env: dict[str, str], *, profile: Path | None = None,
            extra: tuple[str, ...] = (), timeline: bool = False,
            wrap: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    """``rtsearch search MGF --index … [extra]`` as a new process, timed from outside (under cProfile into
    ``profile``; with ``timeline``, run with ``-v`` and its log lines' times since the start kept; ``wrap``: a
    command it runs under, e.g. py-spy's)."""
    out = tmp / "offline.tsv"
    prof = ["-m", "cProfile", "-o", str(profile)] if profile else []
    verbose = ["-v"] if timeline else []
    started = time.time()
    t0 = time.perf_counter()
    with subprocess.Popen([*wrap, sys.executable, *prof, "-m", "rtsearch.cli", *verbose, "search", str(mgf), "--index",
                           str(index),
                           "-o", str(out), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=tmp) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        err = threading.Thread(target=lambda: errs.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
        errs: list[str] = []
        err.start()
        said = proc.stdout.readline()  # the summary line, printed once the results file is written
        printed = time.perf_counter() - t0
        said += proc.stdout.read()
        proc.wait()
        err.join()
    secs = time.perf_counter() - t0
    rows, accepted = psms_at(out, 0.01) if out.is_file() else (0, 0)
    res = {"seconds": round(secs, 2), "summary_printed_at": round(printed, 2), "rows": rows,
           "spectra_per_second": round(rows / secs, 1), "psms_at_1pct_fdr": accepted, "rc": proc.returncode,
           "stdout": said[-300:], "stderr_tail": "".join(errs)[-1500:]}  # fmt: skip
    if timeline:
        res["timeline"] = log_times("".join(errs), started)
        res["stderr_tail"] = ""
    return res


def log_times(log: str, started: float) -> list[tuple[float, str]]:
    """The CLI's log lines (``%(asctime)s %(levelname)s %(name)s: %(message)s``) as (seconds since ``started``,
    message)."""
    import datetime as dt

    out = []
    for line in log.splitlines():
        try:
            stamp = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            continue
        out.append((round(stamp - started, 3), line[24:].split(": ", 1)[-1][:120]))
    return out


def psms_at(results: Path, fdr: float) -> tuple[int, int]:
    """Rows of a results TSV and its target PSMs with ``q_value <= fdr``."""
    import pyarrow.csv as pacsv

    t = pacsv.read_csv(results, parse_options=pacsv.ParseOptions(delimiter="\t"),
                       convert_options=pacsv.ConvertOptions(include_columns=["is_decoy", "q_value"]))  # fmt: skip
    decoy = t["is_decoy"].to_numpy(zero_copy_only=False)
    q = t["q_value"].to_numpy(zero_copy_only=False)
    ok = (decoy == False) & (q <= fdr)  # noqa: E712 (a column of bools or of "true"/"false" parsed as bools)
    return t.num_rows, int(ok.sum())


def bulk(index: Path, mgf: Path, tmp: Path, env: dict[str, str], batches: list[int], serve_args: list[str],
         window: int, spy: tuple[Path, float] | None = None, code: Path = ROOT) -> list[dict[str, Any]]:  # fmt: skip
    """One daemon (of the checkout ``code``), one replay a batch size (this checkout's simulator); ``spy``:
    (folder, seconds) — the daemon recorded by py-spy (GIL holders) from the replay's start for that long (it
    reads the MGF first: give it the reading too)."""
    out: list[dict[str, Any]] = []
    try:
        served = Served(index, tmp / f"res-{code.name}", serve_args, tmp, code=code).__enter__()
    except RuntimeError as e:
        print(f"rtsearch serve {' '.join(serve_args)}: {e}", file=sys.stderr)
        return out
    with served:
        for batch in batches:
            report = tmp / f"bulk{batch}.json"
            t0 = time.perf_counter()
            cpu0 = cpu_by_thread(served.proc.pid)
            label = "-".join([code.name, *(a.strip("-").replace("=", "") for a in serve_args)])
            rec = py_spy(served.proc.pid, spy[1], spy[0] / f"py-spy-bulk-{label}-{batch}.txt") if spy else None
            proc = subprocess.run(
                [sys.executable, "-m", "rtsearch_sim.cli", "replay", str(mgf), "--mode", "push", "--endpoint",
                 served.spectra, "--rate", "max", "--batch", str(batch), "--window", str(window), "--collect",
                 served.results, "--json", str(report)], capture_output=True, text=True, env=env, cwd=tmp,
            )  # fmt: skip
            line: dict[str, Any] = {"code": code.name, "batch": batch, "window": window, "serve_args": serve_args,
                                    "rc": proc.returncode,
                                    "wall_seconds_with_reading": round(time.perf_counter() - t0, 2)}  # fmt: skip
            if report.is_file():
                line.update(json.loads(report.read_text()))
            else:
                line["stderr_tail"] = proc.stderr[-1500:]
            line["daemon_metrics"] = daemon_metrics(served.port)
            cpu1 = cpu_by_thread(served.proc.pid)
            line["cpu_s"] = {k: round(v - cpu0.get(k, 0.0), 2) for k, v in cpu1.items() if v - cpu0.get(k, 0.0) >= 0.01}
            if rec is not None:
                rec.wait()
            print(json.dumps(line), flush=True)
            out.append(line)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_inputs(p)
    p.add_argument("--batches", default="1024,4096", help="spectra per spectra message, one replay each")
    p.add_argument("--window", type=int, default=16_384, help="spectra in flight (rtsearch-sim --window)")
    p.add_argument("--engine-batches", default="1024,4096")
    p.add_argument("--engine-repeat", type=int, default=3, help="passes of the engine alone a batch size (the best)")
    p.add_argument("--serve-args", action="append", default=None,
                   help="extra rtsearch serve arguments (spaces or commas between them); repeated: one daemon "
                        "after the other")
    p.add_argument("--py-spy", type=float, default=0.0, metavar="SECONDS",
                   help="record each replay's daemon with py-spy (GIL holders) for this long, into --out")
    p.add_argument("--out", type=Path, default=Path("."), help="where the py-spy recordings go")
    p.add_argument("--code", type=Path, action="append",
                   help="the checkout whose daemon is measured (default this one); several: one after the other, "
                        "each with every --serve-args")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    backend, res, index = index_and_record(args.data, args.proteins, args.index_cache)
    spectra = looped_spectra(args.data, args.spectra)
    cfg = SearchConfig()
    for b in map(int, args.engine_batches.split(",")):
        # the best of --engine-repeat passes (a 50,000-spectrum pass lasts ~0.3 s: one pass varied 0.30-0.41 s
        # in one call, bench/RESULTS.md 2026-11-29); the ratios are taken against the best
        runs = [time_engine(index, [("bulk", cfg, spectra)], backend, b) for _ in range(args.engine_repeat)]
        res[f"engine_passes{b}_seconds"] = [round(secs, 3) for _, secs in runs]
        n, secs = min(runs, key=lambda r: r[1])
        res[f"engine_batch{b}_spectra_per_second"] = round(n / secs, 1)
        print(f"engine alone, batches of {b}: {n} spectra in {secs:.2f} s = {n / secs:,.0f}/s (best of "
              f"{', '.join(f'{t:.3f}' for _, t in runs)} s)", flush=True)  # fmt: skip
    del index
    if backend.is_gpu:
        backend.xp.get_default_memory_pool().free_all_blocks()
    env = code_env()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        mgf = tmp / "bulk.mgf"
        write_mgf(spectra, mgf)
        res["mgf_bytes"] = mgf.stat().st_size
        res["offline"] = offline(args.index_cache.resolve(), mgf, tmp, env)
        print("offline rtsearch search:", json.dumps(res["offline"]), flush=True)
        res["bulk"] = [line for code in args.code or [ROOT] for extra in args.serve_args or [""] for line in
                       bulk(args.index_cache.resolve(), mgf, tmp, env, [int(b) for b in args.batches.split(",")],
                            extra.replace(",", " ").split(), args.window,
                            (args.out, args.py_spy) if args.py_spy else None, code.resolve())]  # fmt: skip
    best_engine = max(v for k, v in res.items() if k.startswith("engine_batch"))
    for line in res["bulk"]:
        rate = line.get("throughput", 0.0)
        line["over_engine"] = round(rate / best_engine, 3)
        line["over_offline_search"] = round(rate / max(res["offline"]["spectra_per_second"], 1e-9), 3)
        label = " ".join([line["code"], *line["serve_args"]])
        print(f"bulk {label}, batch {line['batch']}: {rate:,.0f} answered/s, lost {line.get('lost')}, "
              f"{line.get('by_status')}; {line['over_engine']}x the engine alone, "
              f"{line['over_offline_search']}x rtsearch search", flush=True)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
