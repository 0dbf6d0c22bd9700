"""What a process's first batches cost beyond the next ones (issue 17: the search's first batch took 0.30 s after the
target opened on the H200 machine, the 49,000 spectra after it 0.24 s; bench/RESULTS.md 2026-11-28 14:48-15:31).

In a new process: open the 20,000-protein bench index on the best backend (timed), then score batches of the bench
spectra one after another — ``--sizes`` (default 4096 three times, then 16 twice) — each timed alone; with
``--profile``, every batch again with the engine's per-stage timing (`Engine(profile=True)`, which synchronizes
the device after each stage), so that what the first batch pays is named; with ``--cprofile``, once more with the
target's open and the first batch each under cProfile (the costliest functions by own time, in ``cprofile``).
One JSON line.

    python3 bench/first_batch_probe.py --data .gpudata/data --index-cache .benchcache/idx20k [--profile] [--cprofile]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROBE = r"""
import cProfile, io, json, pstats, sys, time
t0 = time.perf_counter()
from rtsearch.batch import SpectraBatch
from rtsearch.config import load_config
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.engine import Engine
from rtsearch.search.database import DatabaseTarget
from bench.bulk_bench import looped_spectra
index, data, sizes, mode = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",")], sys.argv[4]
stack_of, stacks = sys.argv[5], {}

class WhoAsks:  # where module ``stack_of`` (or one inside it) is first looked for: the calls that import it
    def find_spec(self, name, path=None, target=None):
        if stack_of and (name == stack_of or name.startswith(stack_of + ".")) and stack_of not in stacks:
            import traceback
            frames = [f for f in traceback.format_stack()[:-1] if "<frozen" not in f]
            stacks[stack_of] = "".join(frames[-24:])
        return None

sys.meta_path.insert(0, WhoAsks())
cprof, uploads = {}, []
import rtsearch.scoring.database.gpu as gpu_module
_upload = gpu_module.upload_all

def timed_upload(cp, arrays, **kw):  # the index's arrays: bytes, seconds (the copy's threads are not profiled)
    t = time.perf_counter()
    out = _upload(cp, arrays, **kw)
    uploads.append([sum(int(a.nbytes) for a in arrays), round(time.perf_counter() - t, 4)])
    return out

gpu_module.upload_all = timed_upload

def profiled(name, call):
    if mode != "cprofile":
        return call()
    prof = cProfile.Profile()
    out = prof.runcall(call)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    cprof[name] = text.getvalue()[-4000:]
    return out
spectra = looped_spectra(__import__("pathlib").Path(data), sum(sizes))
t1 = time.perf_counter()
backend = get_backend("auto")
t2 = time.perf_counter()
target = profiled("open", lambda: DatabaseTarget.open(index, load_config(None).search, backend))
profile = mode == "stages"
if profile:
    target.engine = Engine(target.index, target.cfg, backend, profile=True)
t3 = time.perf_counter()
rows, at, modules = [], 0, []
for n in sizes:
    batch = SpectraBatch.of(spectra[at:at + n]); at += n
    if profile:
        target.engine.stage_seconds.clear()
    t = time.perf_counter()
    before = set(sys.modules)
    if rows or mode != "cprofile":
        target.score(batch)
    else:
        profiled("first batch", lambda: target.score(batch))
    new = sorted(set(sys.modules) - before)  # what a batch imported (the first: lazily imported modules)
    if new:
        groups = {}
        for m in new:
            g = ".".join(m.split(".")[:2])
            groups[g] = groups.get(g, 0) + 1
        modules.append({"batch": len(rows), "imported": len(new), "by_package": groups})
    rows.append({"spectra": n, "s": round(time.perf_counter() - t, 4),
                 "stages": {k: round(v, 4) for k, v in target.engine.stage_seconds.items()} if profile else {}})
print(json.dumps({"backend": backend.name, "imports_s": round(t1 - t0, 3), "backend_s": round(t2 - t1, 3),
                  "open_s": round(t3 - t2, 3), "batches": rows, "uploads": uploads, "imported": modules,
                  "stack": stacks, "cprofile": cprof}))
"""


def main() -> int:
    from bench.serving import bench_inputs, code_env, emit, index_and_record
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_inputs(ap, spectra=False)
    ap.add_argument("--sizes", default="4096,4096,4096,16,16")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--stack-of", default="", metavar="PACKAGE",
                    help="print the stack where module PACKAGE (or one inside it: cupyx.scipy) is first looked for")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    _, res, index = index_and_record(args.data, args.proteins, args.index_cache)
    del index
    runs = []
    modes = ["plain"] + ["stages"] * args.profile + ["cprofile"] * args.cprofile
    for mode in modes:
        argv = [str(args.index_cache.resolve()), str(args.data), args.sizes, mode, args.stack_of]
        out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=code_env(),
                             cwd=ROOT)  # fmt: skip
        row = json.loads(out.stdout.splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-1500:]}
        row["mode"] = mode
        for name, text in row.pop("stack", {}).items():
            print(f"--- where {name} is first looked for\n{text}", flush=True)
        for name, text in row.pop("cprofile", {}).items():
            print(f"--- {name}, cProfile\n{text}", flush=True)
        print(json.dumps(row), flush=True)
        runs.append(row)
    res["runs"] = runs
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
