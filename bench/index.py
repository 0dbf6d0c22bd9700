"""The index build of the bench database (20,000 proteins with entrapment), as a whole process and stage by stage.

Writes the bench FASTA (`bench.harness.entrapment_fasta`, seeded), then:

1. **cold**: ``rtsearch index build --fasta F --out DIR`` as a new process, CuPy's kernel cache
   (``CUPY_CACHE_DIR``) an empty folder — the first build on a machine;
2. **warm**: the same command again with that cache (with ``--baseline DIR``, that checkout's cold and warm too);
3. **in process**: ``build_index`` called ``--repeat`` times in this process (its manifest's
   ``stage_seconds``), the last one under cProfile with the database functions' cumulative times.

Prints one JSON line (and writes ``--json``).

    python3 bench/index.py --data ../shared/data [--proteins 20000] [--repeat 2] [--json index.json]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import ROOT, code_env, emit, entrapment_fasta  # noqa: E402


def cli_build(fasta: Path, out: Path, env: dict[str, str]) -> dict[str, Any]:
    """Wall seconds of ``rtsearch index build`` as a new process."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rtsearch.cli", "index", "build", "--fasta", str(fasta), "--out",
                           str(out)], env=env, capture_output=True, text=True)  # fmt: skip
    res: dict[str, Any] = {"seconds": round(time.perf_counter() - t0, 2), "rc": proc.returncode}
    manifest = out / "manifest.json"
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        res.update(build_seconds=m.get("build_seconds"), stage_seconds=m.get("stage_seconds"))
    if proc.returncode:
        res["stderr_tail"] = proc.stderr[-2000:]
    return res


def profiled(fasta: Path, xp: Any) -> dict[str, float]:
    """Cumulative seconds of the database functions over one build under cProfile."""
    from rtsearch.config import DatabaseConfig
    from rtsearch.database.build import build_index

    prof = cProfile.Profile()
    prof.runcall(build_index, [fasta], DatabaseConfig(), xp=xp)
    stats = pstats.Stats(prof)
    out = {}
    for (file, line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        if "rtsearch/database" in file and row[3] > 0.05:
            out[f"{Path(file).stem}.{name}:{line}"] = round(row[3], 3)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--proteins", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--baseline", type=Path, help="another checkout: its cold and warm builds too (own kernel cache)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from rtsearch.config import DatabaseConfig
    from rtsearch.database.build import build_index
    from rtsearch.scoring.backend import get_backend

    backend = get_backend("auto")
    res: dict[str, Any] = {"backend": backend.name}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        fasta = tmp / "bench.fasta"
        res["proteins"] = entrapment_fasta(args.data, args.proteins, fasta)
        codes = [("", ROOT), *([("baseline ", args.baseline.resolve())] if args.baseline else [])]
        for name, code in codes:  # each its own empty kernel cache: cold, then warm
            env = {**code_env(code), "CUPY_CACHE_DIR": str(tmp / f"cupy-cache-{name.strip() or 'this'}")}
            for run in ("cold", "warm"):
                res[name + run] = cli_build(fasta, tmp / f"idx-{name.strip() or 'this'}-{run}", env)
                print(f"{name}{run}:", json.dumps(res[name + run]), flush=True)
        res["in_process"] = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            index = build_index([fasta], DatabaseConfig(), xp=backend.xp)
            res["in_process"].append({"seconds": round(time.perf_counter() - t0, 2), **index.manifest["stage_seconds"]})
            print("in process:", json.dumps(res["in_process"][-1]), flush=True)
            res["counts"] = index.manifest["counts"]
            del index
        res["profile"] = profiled(fasta, backend.xp)
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
