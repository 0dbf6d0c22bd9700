"""Spectral library search throughput against a >= 1,000,000-entry library: narrow and open, GPU vs NumPy.

The library is the NIST BSA consensus library with its shuffle-and-reposition decoys
(`rtsearch library import`), replicated to ``--entries``: copy 0 is the library itself,
every other copy moves each entry's precursor m/z by a seeded uniform shift within
``--spread`` Th (peaks unchanged), so windows hold as many entries as a real library of
that size would. Queries are BSA1's MS2 spectra, repeated. Both backends score the same
queries in one run; the GPU's batches include packing the spectra, the copies both ways
and the F-value on the host (everything `GpuLibrary.score` does).

    python3 bench/library.py --data ../shared/data [--entries 1000000] [--json OUT]

Windows: narrow is 20 ppm (BSA1's tolerance), open is +-500 Th around the precursor m/z
(`rtsearch search --library --open`). NumPy is timed on fewer queries (``--numpy-narrow``,
``--numpy-open``): an open query costs it seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import emit  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.library.store import SpectralLibrary, import_library, load_library, write_store  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.scoring.library.scores import LibraryMatches, score_library  # noqa: E402
from rtsearch.types import Spectrum, Tolerance  # noqa: E402

NARROW = Tolerance(20, "ppm")
OPEN = Tolerance(500, "Da")


def replicated(base: SpectralLibrary, n_entries: int, spread: float, out: Path, seed: int = 1) -> SpectralLibrary:
    """``base`` copied until it holds ``n_entries`` entries, copies' precursors shifted (cached in ``out``)."""
    manifest_file = out / "manifest.json"
    if manifest_file.is_file() and json.loads(manifest_file.read_text())["counts"]["entries"] == n_entries:
        return load_library(out)
    e = len(base)
    copies = -(-n_entries // e)
    src = np.tile(np.arange(e), copies)[:n_entries]
    copy = np.repeat(np.arange(copies), e)[:n_entries]
    rng = np.random.default_rng(seed)
    shift = np.where(copy == 0, 0.0, rng.uniform(-spread, spread, n_entries))
    prec = np.maximum(base.precursor_mz[src] + shift, 1.0)
    order = np.argsort(prec, kind="stable")
    src, prec = src[order], prec[order]
    counts = (base.peak_offsets[1:] - base.peak_offsets[:-1])[src]
    offsets = np.zeros(n_entries + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    # peak positions of every copied entry: its source's offset plus 0..count-1
    starts = np.repeat(base.peak_offsets[src] - offsets[:-1], counts) + np.arange(int(offsets[-1]))
    arrays = {
        "precursor_mz": prec, "charge": base.charge[src], "is_decoy": base.decoy[src], "peak_offsets": offsets,
        "peak_bins": base.peak_bins[starts], "peak_values": base.peak_values[starts],
    }  # fmt: skip
    manifest = dict(base.manifest)
    manifest["counts"] = dict(manifest["counts"], entries=n_entries, peaks=int(offsets[-1]))
    manifest["sources"] = list(manifest["sources"]) + [f"replicated x{copies}, shifts within +-{spread} Th"]
    write_store(out, arrays, manifest, [base.peptides[i] for i in src], [base.proteins[i] for i in src])
    return load_library(out)


def repeat(spectra: list[Spectrum], n: int) -> list[Spectrum]:
    return [spectra[i % len(spectra)] for i in range(n)]


def rate(fn: Any, batches: list[list[Spectrum]], seconds: float) -> dict[str, float]:
    """Queries per second over whole passes of ``batches`` (at least ``seconds``), and batch times."""
    fn(batches[0])  # warm: compile, caches
    times, n = [], 0
    t0 = time.perf_counter()
    while True:
        for b in batches:
            t = time.perf_counter()
            fn(b)
            times.append(time.perf_counter() - t)
            n += len(b)
        if time.perf_counter() - t0 >= seconds:
            break
    wall = time.perf_counter() - t0
    ms = np.asarray(times) * 1e3
    return {"queries": n, "seconds": wall, "queries_per_s": n / wall, "batch_ms_p50": float(np.median(ms)),
            "batch_ms_max": float(ms.max())}  # fmt: skip


def agreement(ref: LibraryMatches, got: LibraryMatches) -> dict[str, float]:
    hit = ref.entry >= 0
    return {"same_entry": float((ref.entry == got.entry)[hit].mean()) if hit.any() else 1.0,
            "max_dot_diff": float(np.abs(ref.dot - got.dot)[hit].max(initial=0.0))}  # fmt: skip


def crossover(gpu: Any, batch: list[Spectrum]) -> list[dict[str, float]]:
    """Queries/s of the warp walk and of the matrix product as the window widens (one batch, after a warm one)."""
    from rtsearch.scoring.library.scores import library_queries

    rows = []
    for half in (0.02, 0.2, 2.0, 20.0, 200.0):
        tol = Tolerance(half, "Da")
        q = library_queries(gpu.lib, batch, tol)
        row = {"half_width_th": half, "candidates_mean": float((q.b - q.a).mean())}
        for mode in ("narrow", "open"):
            if mode == "narrow" and row["candidates_mean"] > 50_000:
                continue
            gpu.score(batch, tol, mode=mode)
            t = time.perf_counter()
            gpu.score(batch, tol, mode=mode)
            row[f"{mode}_queries_per_s"] = len(batch) / (time.perf_counter() - t)
        print("crossover: " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="the shared data folder")
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--spread", type=float, default=50.0, help="Th: copies' precursor shifts (default 50)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/rtsearch-libbench"))
    ap.add_argument("--narrow-batch", type=int, default=4096)
    ap.add_argument("--open-batch", type=int, default=2048)
    ap.add_argument("--seconds", type=float, default=5.0, help="GPU timing per mode (default 5)")
    ap.add_argument("--numpy-narrow", type=int, default=1120, help="queries NumPy scores narrow (default 1120)")
    ap.add_argument("--numpy-open", type=int, default=6, help="queries NumPy scores open (default 6)")
    ap.add_argument("--backend", choices=["auto", "cupy", "numpy"], default="auto")
    ap.add_argument("--crossover", action="store_true",
                    help="also time both GPU paths on windows of 0.02 to 200 Th (where 'auto' should switch)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    report: dict[str, Any] = {"entries": args.entries, "spread_th": args.spread}
    t = time.perf_counter()
    base_dir = args.cache / "base"
    if not (base_dir / "manifest.json").is_file():
        import_library([args.data / "spectral-libraries/nist-bsa_consensus.msp"], base_dir)
    lib = replicated(load_library(base_dir), args.entries, args.spread, args.cache / f"lib{args.entries}")
    n_peaks = int(lib.peak_bins.shape[0])
    report["library"] = {"entries": len(lib), "peaks": n_peaks, "peaks_per_entry": n_peaks / len(lib),
                         "build_s": time.perf_counter() - t}  # fmt: skip
    spectra = [s for s in read_spectra(args.data / "bsa-orbitrapxl/BSA1.mzML.gz") if s.ms_level == 2]
    print(f"library {len(lib):,} entries, {lib.peak_bins.shape[0]:,} peaks; {len(spectra):,} query spectra", flush=True)

    # NumPy reference, on the first queries
    few, very_few = repeat(spectra, args.numpy_narrow), repeat(spectra, args.numpy_open)
    t = time.perf_counter()
    ref_narrow = score_library(lib, few, NARROW)
    np_narrow = len(few) / (time.perf_counter() - t)
    t = time.perf_counter()
    ref_open = score_library(lib, very_few, OPEN)
    np_open = len(very_few) / (time.perf_counter() - t)
    report["numpy"] = {"narrow_queries_per_s": np_narrow, "open_queries_per_s": np_open,
                       "narrow_queries": len(few), "open_queries": len(very_few),
                       "narrow_candidates_mean": float(ref_narrow.candidates.mean()),
                       "open_candidates_mean": float(ref_open.candidates.mean())}  # fmt: skip
    print(f"numpy: narrow {np_narrow:,.0f} q/s ({ref_narrow.candidates.mean():.1f} candidates/query), "
          f"open {np_open:,.2f} q/s ({ref_open.candidates.mean():,.0f} candidates/query)", flush=True)  # fmt: skip

    backend = get_backend(args.backend)
    report["device"] = backend.device
    if backend.is_gpu:
        from rtsearch.scoring.library.gpu import GpuLibrary

        cp = backend.xp
        pool = cp.get_default_memory_pool()
        t = time.perf_counter()
        gpu = GpuLibrary(lib, cp)
        load_s = time.perf_counter() - t
        narrow = [repeat(spectra, args.narrow_batch)] * 4
        r_narrow = rate(lambda b: gpu.score(b, NARROW, mode="narrow"), narrow, args.seconds)
        agree_narrow = agreement(ref_narrow, gpu.score(few, NARROW, mode="narrow"))
        t = time.perf_counter()
        gpu.score(very_few, OPEN, mode="open")  # makes the dense copy
        dense_s = time.perf_counter() - t
        r_open = rate(lambda b: gpu.score(b, OPEN, mode="open"), [repeat(spectra, args.open_batch)] * 2, args.seconds)
        agree_open = agreement(ref_open, gpu.score(very_few, OPEN, mode="open"))
        if args.crossover:
            report["crossover"] = crossover(gpu, repeat(spectra, args.open_batch))
        mem = gpu.device_bytes()
        report["gpu"] = {
            "load_s": load_s, "dense_build_s": dense_s, "narrow": r_narrow, "open": r_open,
            "narrow_vs_numpy": agree_narrow, "open_vs_numpy": agree_open,
            "library_bytes": mem, "pool_used_bytes": int(pool.used_bytes()),
            "pool_total_bytes": int(pool.total_bytes()),
            "narrow_speedup": r_narrow["queries_per_s"] / np_narrow, "open_speedup": r_open["queries_per_s"] / np_open,
        }  # fmt: skip
        print(f"gpu ({backend.device}): library on device in {load_s:.1f} s, sparse {mem['sparse'] / 1e9:.2f} GB, "
              f"dense {mem['dense'] / 1e9:.2f} GB (made in {dense_s:.1f} s); "
              f"pool {pool.total_bytes() / 1e9:.2f} GB")  # fmt: skip
        modes = (("narrow", r_narrow, agree_narrow, np_narrow), ("open", r_open, agree_open, np_open))
        for name, r, agree, npr in modes:
            print(f"gpu {name}: {r['queries_per_s']:,.0f} q/s ({r['queries_per_s'] / npr:,.0f}x numpy), batch of "
                  f"{args.narrow_batch if name == 'narrow' else args.open_batch}: p50 {r['batch_ms_p50']:.1f} ms, "
                  f"max {r['batch_ms_max']:.1f} ms; same entry as numpy {agree['same_entry']:.3f}, "
                  f"max dot diff {agree['max_dot_diff']:.1e}")  # fmt: skip
    emit(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
