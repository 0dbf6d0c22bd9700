"""`rtsearch search`'s whole-process wall on the 50,000-spectrum bench MGF, cold and warm (issue 17).

Builds (or loads) the 20,000-protein index with entrapment (`bench/stream_bench.py`'s) and writes the dev runs'
MS2 spectra looped into one MGF (`bench/bulk_bench.py`'s), then runs ``rtsearch search RUN.mgf --index …``
as a new process, timed from outside:

1. **cold**: CuPy's kernel cache (``CUPY_CACHE_DIR``) an empty folder — every kernel compiled by NVRTC;
2. **warm**: the same folder again — what a second process on the machine sees;
3. **profiled**: warm, under ``python -m cProfile``; the costliest functions are printed.

Prints one JSON line (and writes ``--json``).

    python3 bench/search_wall.py --data .gpudata/data --index-cache .benchcache/idx20k [--spectra 50000]
        [--baseline .gpudata/base --repeat 2] [--py-spy spy.txt]
"""

from __future__ import annotations

import argparse
import json
import pstats
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bulk_bench import looped_spectra, offline, write_mgf  # noqa: E402
from bench.serving import bench_inputs, code_env, emit, index_and_record  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_inputs(ap)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--baseline", type=Path, help="another checkout: its warm wall and this one's, alternately")
    ap.add_argument("--repeat", type=int, default=2, help="alternations with --baseline (default 2)")
    ap.add_argument("--variant", action="append", default=[],
                    help="extra search arguments (one string, e.g. '--batch-size 4096'; NAME=VALUE words: its "
                    "environment), each run warm twice, with -v (its timeline kept)")
    ap.add_argument("--py-spy", type=Path, help="one more warm run under py-spy (every thread, idle too, raw "
                    "folded stacks into this file; `python bench/spy_summary.py` reads them)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    _, res, index = index_and_record(args.data, args.proteins, args.index_cache)
    del index
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        mgf = tmp / "bulk.mgf"
        write_mgf(looped_spectra(args.data, args.spectra), mgf)
        res["mgf_bytes"] = mgf.stat().st_size
        env = {**code_env(), "CUPY_CACHE_DIR": str(tmp / "cupy-cache")}
        folder = args.index_cache.resolve()
        res["cold"] = offline(folder, mgf, tmp, env)
        print("cold:", json.dumps(res["cold"]), flush=True)
        res["warm"] = offline(folder, mgf, tmp, env)
        print("warm:", json.dumps(res["warm"]), flush=True)
        if args.baseline:  # before/after a change, the same machine and call: cold (its own cache), warm alternately
            base_env = {**code_env(args.baseline.resolve()), "CUPY_CACHE_DIR": str(tmp / "cupy-cache-baseline")}
            res["baseline_cold"] = offline(folder, mgf, tmp, base_env)
            print("baseline cold:", json.dumps(res["baseline_cold"]), flush=True)
            for r in range(args.repeat):
                for name, e in (("baseline", base_env), ("this", env)):
                    res[f"{name}_warm_{r}"] = offline(folder, mgf, tmp, e)
                    print(f"{name} warm {r}:", json.dumps(res[f"{name}_warm_{r}"]), flush=True)
        for r in range(2 if args.variant else 0):
            for v in args.variant:
                words = v.split()
                assigned = dict(w.split("=", 1) for w in words if re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", w))
                extra = tuple(w for w in words if w.split("=", 1)[0] not in assigned)
                res[f"{v} warm {r}"] = offline(folder, mgf, tmp, {**env, **assigned}, extra=extra, timeline=True)
                print(f"{v} warm {r}:", json.dumps(res[f"{v} warm {r}"]), flush=True)
        res["timeline"] = offline(folder, mgf, tmp, env, timeline=True)  # warm, -v: the log lines' times
        print("timeline:", json.dumps(res["timeline"]), flush=True)
        if args.py_spy:
            spy = shutil.which("py-spy") or "/tmp/site/bin/py-spy"
            res["py_spy"] = offline(folder, mgf, tmp, env, wrap=(spy, "record", "--idle", "--threads", "-r", "500",
                                                                 "-f", "raw", "-o", str(args.py_spy), "--"))
            print("py-spy:", json.dumps(res["py_spy"]), flush=True)
        prof = tmp / "search.prof"
        res["profiled"] = offline(folder, mgf, tmp, env, profile=prof)
        if prof.is_file():
            stats = pstats.Stats(str(prof))
            stats.sort_stats("cumulative").print_stats(args.top)
            stats.sort_stats("tottime").print_stats(args.top)
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
