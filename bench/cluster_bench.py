"""Scale-out measured (issues 20 and 21): the partition's work balance, then the daemon with 1 engine and as the
front door of N cluster workers, under the shared client, the echo floor beside.

1. **Balance** (no daemon): the 20,000-protein index with entrapment of `bench/stream_bench.py` cut by Li et al.'s
   equal-work rule (`rtsearch.cluster.partition`) into N = 2, 4, 8 pieces; per piece, the index's candidates
   (the rule's own measure) and the candidates the bench spectra (the dev runs' MS2, what ``rt_load.py`` sends)
   meet in their precursor window (±``--ppm``, the work a search does), with Li's cuts and with the cuts the
   daemon makes once those spectra came (`LiveCuts`); max / mean of each.
2. **Serving**: ``echo_floor.py`` under ``rt_load.py`` at 200/s (the floor), then ``rtsearch serve`` with
   ``--serve-args`` alone ("one engine") and with each ``--configs`` entry (``N:MODE[:GB]``, e.g. ``2:replicate``;
   ``2:partition:1.5``: each worker with room for 1.5 GB of the target, ``[serve] worker_memory_gb``: a slice;
   ``2:auto:0.6x``: room for 0.6 of the target),
   each under ``rt_load.py --senders S`` at ``--rates``: answered, lost, duplicates, shed and latency per rate;
   the scored spectra a second at each rate ((answered − shed) / seconds) gives the capacity, and the efficiency
   of N workers is capacity(N) / (N × capacity(1)).

``--placement local`` starts the workers as processes of this host (``--gpus-per-worker 1`` spreads them over its
GPUs; 0: CPU workers or one shared GPU); ``ray`` as Ray actors. One JSON line per measurement; ``--json`` writes
them all.

    python3 bench/cluster_bench.py --data .gpudata/data --tools .gpudata/tools --index-cache .benchcache/idx20k \\
        --serve-args "--backend numpy" --configs 1:replicate,2:replicate,4:replicate,8:replicate,4:partition \\
        --rates 2000,8000 --seconds 10 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.rtload_bench import rt_load, write_mgf  # noqa: E402
from bench.serving import Served, echo_floor, index_and_record  # noqa: E402
from rtsearch.cluster.partition import (  # noqa: E402
    LiveCuts,
    balance,
    bin_work,
    equal_work_cuts,
    owners,
    piece_work,
    spectrum_masses,
)
from rtsearch.io.spectra import read_spectra  # noqa: E402


def balances(index: Any, mgf: Path, ppm: float) -> list[dict[str, Any]]:
    """Phase 1 (see the module docstring)."""
    masses = np.sort(np.asarray(index.mass, np.float64))
    work, start = bin_work(masses)
    spectra = list(read_spectra(mgf))
    sm = spectrum_masses(np.array([s.precursor_mz for s in spectra]), [s.charges for s in spectra])
    met = np.searchsorted(masses, sm * (1 + ppm * 1e-6), side="right") - np.searchsorted(masses, sm * (1 - ppm * 1e-6))
    rows = []
    for n in (2, 4, 8):
        cuts = equal_work_cuts(work, start, n)
        per_index = piece_work(work, start, cuts)
        per_spectra = np.bincount(owners(sm, cuts), weights=met, minlength=n)
        live = LiveCuts(work, start, n, every=sm.size)  # the daemon's cuts once these spectra came
        live.add(sm)
        per_live = np.bincount(owners(sm, live.cuts), weights=met, minlength=n)
        rows.append({"phase": "balance", "pieces": n, "cuts_da": np.round(cuts, 1).tolist(),
                     "index_candidates": per_index.astype(int).tolist(),
                     "index_max_over_mean": round(balance(per_index), 4),
                     "spectra": len(spectra), "spectra_candidates": per_spectra.astype(int).tolist(),
                     "spectra_max_over_mean": round(balance(per_spectra), 4),
                     "live_cuts_da": np.round(live.cuts, 1).tolist(), "spectra_live": per_live.astype(int).tolist(),
                     "spectra_live_max_over_mean": round(balance(per_live), 4)})  # fmt: skip
    return rows


def serving(args: argparse.Namespace, mgf: Path, tmp: Path, target_gb: float) -> list[dict[str, Any]]:
    """Phase 2 (see the module docstring); ``target_gb``: the target's size on a device."""
    rows: list[dict[str, Any]] = []
    with echo_floor(args.tools) as (sp, rp):
        for r in rt_load(args.tools, mgf, sp, rp, "--rates", "200", "--seconds", "10", "--tag", "floor"):
            rows.append({"phase": "floor", **r})
            print(json.dumps(rows[-1]), flush=True)
    configs = [("one engine", [])] + [
        (c, ["--cluster", c.split(":")[0], "--cluster-mode", c.split(":")[1], "--placement", args.placement,
             "--config", str(_cluster_toml(tmp, c, args.gpus_per_worker, _room((c.split(":") + ["0"])[2], target_gb)))])
        for c in args.configs.split(",") if c
    ]  # fmt: skip
    for label, extra in configs:
        t0 = time.perf_counter()
        with Served(args.index_cache.resolve(), tmp / f"res-{len(rows)}", [*args.serve_args.split(), *extra],
                    tmp) as served:  # fmt: skip
            ready_s = time.perf_counter() - t0
            for rate in args.rates.split(","):
                for r in rt_load(args.tools, mgf, served.spectra, served.results, "--rates", rate, "--seconds",
                                 str(args.seconds), "--senders", str(args.senders), "--budget-ms",
                                 str(args.budget_ms), "--tag", label):  # fmt: skip
                    shed = r.get("statuses", {}).get("shed", 0)
                    scored = (r["answered"] - shed) / args.seconds
                    rows.append({"phase": "serve", "config": label, "ready_s": round(ready_s, 1),
                                 "scored_per_s": round(scored, 1), **r})  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)
    return rows


def _room(text: str, target_gb: float) -> float:
    """``worker_memory_gb`` of a ``--configs`` entry: GB, or ``0.6x``: that fraction of the target."""
    return float(text[:-1]) * target_gb if text.endswith("x") else float(text)


def _cluster_toml(tmp: Path, label: str, gpus: float, memory_gb: float) -> Path:
    path = tmp / f"cluster-{label.replace(':', '-')}.toml"
    path.write_text(f"[serve]\ngpus_per_worker = {gpus}\nworker_memory_gb = {memory_gb}\n")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--tools", type=Path, required=True)
    ap.add_argument("--index-cache", type=Path, required=True)
    ap.add_argument("--proteins", type=int, default=20_000)
    ap.add_argument("--ppm", type=float, default=20.0, help="precursor window of the balance's spectra")
    ap.add_argument("--serve-args", default="")
    ap.add_argument("--configs", default="2:replicate,2:partition", help="N:MODE[:GB],... (beside one engine)")
    ap.add_argument("--placement", choices=("local", "ray"), default="local")
    ap.add_argument("--gpus-per-worker", type=float, default=0.0)
    ap.add_argument("--rates", default="2000")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--senders", type=int, default=2)
    ap.add_argument("--budget-ms", type=float, default=100.0)
    ap.add_argument("--balance-only", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    _, record, index = index_and_record(args.data, args.proteins, args.index_cache)
    print(json.dumps(record), flush=True)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        mgf = tmp / "runs.mgf"
        write_mgf(args.data, mgf)
        rows = balances(index, mgf, args.ppm)
        for r in rows:
            print(json.dumps(r), flush=True)
        if not args.balance_only:
            from rtsearch.cluster.serve import target_bytes
            from rtsearch.config import SearchConfig
            from rtsearch.scoring.backend import get_backend
            from rtsearch.search.database import DatabaseTarget

            size = target_bytes(DatabaseTarget(index, SearchConfig(), get_backend("numpy")))
            rows.append({"phase": "target", "device_gb": round(size / 1e9, 3)})
            print(json.dumps(rows[-1]), flush=True)
            rows += serving(args, mgf, tmp, size / 1e9)
    if args.json:
        args.json.write_text(json.dumps({"record": record, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
