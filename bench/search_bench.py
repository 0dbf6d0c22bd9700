"""Scoring-engine throughput, GPU vs NumPy, on a ≥ 20,000-protein database.

Database: every FASTA under the data folder plus shuffled entrapment proteins
(seeded) up to ``--proteins``; trypsin, 2 missed cleavages, Oxidation M ≤ 2.
Spectra: all dev runs (each with its own tolerances) replayed with new scan
numbers until ``--spectra`` spectra. Times ``Engine.score`` end to end:
packing, host↔device copies, preprocessing, candidates, full scoring, features.

    python bench/search_bench.py --data ../shared/data --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rtsearch.batch import SpectraBatch
from rtsearch.config import DatabaseConfig  # noqa: E402
from rtsearch.database.build import build_index  # noqa: E402
from rtsearch.database.fasta import read_fastas  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.scoring.database.engine import Engine  # noqa: E402
from tests.devruns import DEV_RUNS  # noqa: E402


def entrapment_fasta(data: Path, n_proteins: int, out: Path, seed: int = 7) -> int:
    """Write every FASTA of ``data`` plus shuffled decoy-free entrapments up to ``n_proteins``."""
    fastas = sorted(data.rglob("*.fasta"))
    prots = read_fastas(fastas)
    rng = np.random.default_rng(seed)
    lines = [f">{p.accession}\n{p.sequence}\n" for p in prots]
    i = 0
    while len(prots) + i < n_proteins:
        src = prots[i % len(prots)].sequence
        shuffled = "".join(rng.permutation(list(src)))
        lines.append(f">ENTRAPMENT_{i:05d}\n{shuffled}\n")
        i += 1
    out.write_text("".join(lines))
    return len(prots) + i


def looped_runs(data: Path, n_spectra: int):
    """Spectra of every dev run, replayed with new scan numbers, and each run's config."""
    runs = []
    for dev in DEV_RUNS:
        cfg = dev.search_config()
        spectra = list(read_spectra(data / dev.run, default_charges=cfg.charges))
        runs.append((dev.name, cfg, spectra))
    per_pass = sum(len(s) for _, _, s in runs)
    passes = -(-n_spectra // per_pass)
    looped = []
    for name, cfg, spectra in runs:
        out = []
        for p in range(passes):
            out.extend(dataclasses.replace(s, scan=s.scan + p * 1_000_000) for s in spectra)
        looped.append((name, cfg, out))
    return looped


def time_engine(index, looped, backend, batch: int, limit: int | None = None, profile: bool = False):
    """Spectra scored and seconds, over every run (each ``limit`` spectra at most)."""
    engines = {name: Engine(index, cfg, backend, profile=profile) for name, cfg, _ in looped}
    for name, _, spectra in looped:  # warm-up: compile kernels, fill memory pools
        engines[name].score(SpectraBatch.of(spectra[: min(batch, 256)]))
    backend.synchronize()
    n, t0 = 0, time.perf_counter()
    for name, _, spectra in looped:
        todo = spectra if limit is None else spectra[:limit]
        for i in range(0, len(todo), batch):
            engines[name].score(SpectraBatch.of(todo[i : i + batch]))
            n += len(todo[i : i + batch])
    backend.synchronize()
    secs = time.perf_counter() - t0
    if profile:
        stages: dict[str, float] = {}
        for name, eng in engines.items():
            print(f"  {name}: " + ", ".join(f"{k} {v:.3f}s" for k, v in eng.stage_seconds.items()), flush=True)
            for k, v in eng.stage_seconds.items():
                stages[k] = stages.get(k, 0.0) + v
        print("  all: " + ", ".join(f"{k} {v:.3f}s" for k, v in stages.items()), flush=True)
    return n, secs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="the shared/data folder")
    ap.add_argument("--proteins", type=int, default=20_000)
    ap.add_argument("--spectra", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=16384)
    ap.add_argument("--numpy-spectra", type=int, default=400, help="per run, for the NumPy comparison")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--profile", action="store_true", help="also time each engine step (synchronizing)")
    args = ap.parse_args()
    gpu = get_backend("auto")
    res: dict[str, object] = {"date": time.strftime("%Y-%m-%d"), "device": gpu.device, "backend": gpu.name,
                              "cpu": platform.processor() or platform.machine()}
    with tempfile.TemporaryDirectory() as tmp:
        fasta = Path(tmp) / "bench.fasta"
        res["proteins"] = entrapment_fasta(args.data, args.proteins, fasta)
        cfg = DatabaseConfig()
        t0 = time.perf_counter()
        index = build_index([fasta], cfg, xp=gpu.xp)
        res["index_build_seconds"] = round(time.perf_counter() - t0, 2)
    res["index_counts"] = index.manifest["counts"]
    res["index_host_bytes"] = index.nbytes()
    print(f"index: {res['proteins']} proteins {index.manifest['counts']} built in {res['index_build_seconds']} s, "
          f"{index.nbytes() / 1e9:.2f} GB on the host", flush=True)
    looped = looped_runs(args.data, args.spectra)
    if gpu.is_gpu:
        gpu.xp.get_default_memory_pool().free_all_blocks()
        n, secs = time_engine(index, looped, gpu, args.batch)
        res["gpu_spectra"] = n
        res["gpu_seconds"] = round(secs, 3)
        res["gpu_spectra_per_second"] = round(n / secs, 1)
        eng = Engine(index, looped[0][1], gpu)
        res["gpu_index_bytes"] = eng.device_bytes()
        res["gpu_pool_bytes_after"] = gpu.memory_used_bytes()
        if args.profile:
            time_engine(index, looped, gpu, args.batch, profile=True)
        print(f"GPU: {n} spectra in {secs:.2f} s = {n / secs:,.0f} spectra/s; index on GPU "
              f"{eng.device_bytes() / 1e9:.2f} GB, pool {gpu.memory_used_bytes() / 1e9:.2f} GB", flush=True)
    n, secs = time_engine(index, looped, get_backend("numpy"), 512, limit=args.numpy_spectra)
    res["numpy_spectra"] = n
    res["numpy_seconds"] = round(secs, 3)
    res["numpy_spectra_per_second"] = round(n / secs, 1)
    print(f"NumPy: {n} spectra in {secs:.2f} s = {n / secs:,.0f} spectra/s", flush=True)
    if gpu.is_gpu:
        res["gpu_over_numpy"] = round(res["gpu_spectra_per_second"] / res["numpy_spectra_per_second"], 1)
        print(f"GPU / NumPy: {res['gpu_over_numpy']}x")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
