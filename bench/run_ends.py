"""How fast a daemon ends runs, and how soon it serves again after a kill with many runs open.

An adversarial client opened 20,000 runs: they ended at 10-16 a second, the daemon held a file a run, and a restart
with 18,432 journals took 164 s to become ready. Here ``rtsearch serve`` (NumPy, the demo's index) runs as deployed,
in a process of its own:

- **ends**: ``--runs`` runs, each one malformed spectrum (answered ``invalid`` at once: no scoring, so what is
  measured is a run's start, journal, end and results file) and its ``run.end``, sent as fast as the socket takes
  them; runs ended a second = runs / seconds from the first message until the last results file is in the folder.
- **restart**: ``--pending`` runs left open, the daemon SIGKILLed, then started again on the folder: seconds until
  it says ready, and until every run is recovered into its results file.

    python3 bench/run_ends.py --runs 5000 --pending 20000 --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from bench.harness import emit  # noqa: E402
from rtsearch.cli.demo import RUN, TOML, bundled, cached_index, default_cache  # noqa: E402
from rtsearch.protocol.wire import RUN_END, encode_spectrum  # noqa: E402
from rtsearch.serve.runs.journal import FOLDER  # noqa: E402
from rtsearch_sim.replay import Sender, load_run  # noqa: E402
from tests.streaming import ServeProcess, free_port  # noqa: E402


def _serve(index: Path, results: Path, backend: str) -> tuple[ServeProcess, str, float]:
    """A daemon on ``results`` (every run kept open until its run.end); its spectra endpoint and the seconds it
    took to say ready."""
    config = results.parent / f"{results.name}.toml"
    config.write_text(bundled(TOML).read_text() + "\n[serve]\nmax_open_runs = 100000\n")
    sp = free_port()
    t = time.monotonic()
    proc = ServeProcess(["--index", str(index), "--config", str(config), "--backend", backend, "--spectra",
                         f"tcp://127.0.0.1:{sp}", "--spectra-mode", "pull", "--results",
                         f"tcp://127.0.0.1:{free_port()}", "--metrics-port", "0", "--results-dir",
                         str(results)])  # fmt: skip
    if not proc.wait_for(" ready: ", 600):
        raise SystemExit(f"the daemon did not become ready:\n{proc.log[-3000:]}")
    return proc, f"tcp://127.0.0.1:{sp}", time.monotonic() - t


def _runs(first: int, n: int, *, end: bool) -> list[list[bytes]]:
    """``n`` runs of one malformed spectrum each (peaks out of order), each with its ``run.end`` when ``end``."""
    sp = next(s for s in load_run(bundled(RUN)) if s.ms_level == 2)
    bad = dataclasses.replace(sp, mz=sp.mz[::-1].copy())
    out = []
    for k in range(first, first + n):
        out.append(encode_spectrum(dataclasses.replace(bad, run=f"r{k}", scan=1)))
        if end:
            out.append([RUN_END, json.dumps({"v": 1, "run": f"r{k}"}).encode()])
    return out


def _files(results: Path) -> int:
    return sum(1 for name in os.listdir(results) if name.endswith(".tsv"))


def _wait_files(results: Path, n: int, timeout_s: float) -> float:
    """Seconds until ``n`` results files are in ``results`` (inf: not within ``timeout_s``)."""
    t = time.monotonic()
    while _files(results) < n:
        if time.monotonic() - t > timeout_s:
            return float("inf")
        time.sleep(0.05)
    return time.monotonic() - t


def ends(index: Path, n: int, backend: str, tmp: Path) -> dict[str, Any]:
    results = tmp / "ends"
    results.mkdir()
    daemon, spectra, _ = _serve(index, results, backend)
    try:
        messages = _runs(0, n, end=True)
        t = time.monotonic()
        with Sender(spectra, mode="push", wait_s=60) as s:
            for frames in messages:
                s.send(frames)
        sent_s = time.monotonic() - t
        waited = _wait_files(results, n, 3600)
        seconds = sent_s + waited
    finally:
        daemon.proc.terminate()
        daemon.proc.wait(300)
    return {"runs": n, "seconds": round(seconds, 2), "runs_ended_per_s": round(n / seconds, 1)}


def restart(index: Path, n: int, backend: str, tmp: Path) -> dict[str, Any]:
    results = tmp / "restart"
    results.mkdir()
    daemon, spectra, _ = _serve(index, results, backend)
    try:
        with Sender(spectra, mode="push", wait_s=60) as s:
            for frames in _runs(0, n, end=False):
                s.send(frames)
        journals = results / FOLDER
        while sum(1 for p in journals.glob("*.rtj")) < n:  # every run journaled (answered)
            time.sleep(0.1)
        daemon.proc.kill()
        daemon.proc.wait(60)
    finally:
        daemon.kill()
    t = time.monotonic()
    again, _, ready_s = _serve(index, results, backend)
    try:
        _wait_files(results, n, 3600)
        recovered_s = time.monotonic() - t
    finally:
        again.proc.terminate()
        again.proc.wait(300)
    return {"pending": n, "ready_s": round(ready_s, 2), "all_recovered_s": round(recovered_s, 1),
            "recovered_per_s": round(n / recovered_s, 1)}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5000, help="runs ended (0: skip)")
    p.add_argument("--pending", type=int, default=20000, help="runs open at the kill (0: skip)")
    p.add_argument("--backend", default="numpy", choices=["auto", "cupy", "numpy"])
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    index, _ = cached_index(default_cache())
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M"), "backend": args.backend,
                           "cpus": os.cpu_count()}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        if args.runs:
            out["ends"] = ends(index.folder, args.runs, args.backend, Path(tmp))
            print(json.dumps(out["ends"]), file=sys.stderr)
        if args.pending:
            out["restart"] = restart(index.folder, args.pending, args.backend, Path(tmp))
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
