"""Offline search: ``rtsearch search`` against Comet and Sage on the same files, same machine, same call.

Inputs (`bench.harness.bench_files`, seeded, cached in ``--work``): the bench FASTA (every FASTA of ``--data``
plus residue-shuffled entrapment proteins up to ``--proteins``) and the dev runs' MS2 spectra looped into one MGF
of ``--spectra``. Each engine runs as a whole process, timed from outside; the table gives its wall and its
target PSMs at 1 % FDR:

- ``rtsearch index build`` then ``rtsearch search RUN.mgf --index …``: cold (CuPy's kernel cache an empty
  folder: every kernel compiled) and warm (the same cache again: any later search on the machine);
- the scoring engine alone (``Engine.score`` over the looped spectra in batches; GPU where there is one, and
  NumPy on ``--numpy-spectra`` of them): spectra a second;
- the peers of `bench/peers.py` (``--peers comet,sage``, their packages in ``--peers-dir``; a peer that fails is
  recorded with its error, not raised).

    python3 bench/search.py --data ../shared/data --peers-dir .gpudata/peers --json search.json
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import ROOT, bench_files, code_env, emit, inputs, looped_spectra, psms_at  # noqa: E402
from bench.peers import SETTINGS, run_comet, run_sage  # noqa: E402


def whole(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """``rtsearch CMD`` as a new process: its wall seconds (and its error's tail when it fails)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rtsearch.cli", *cmd], env=env, cwd=cwd, capture_output=True,
                          text=True, check=False)  # fmt: skip
    res: dict[str, Any] = {"wall_seconds": round(time.perf_counter() - t0, 2), "rc": proc.returncode}
    if proc.returncode:
        res["stderr_tail"] = proc.stderr[-1500:]
    return res


def engine_rate(index_dir: Path, data: Path, spectra: int, backend_name: str, batch: int) -> dict[str, Any]:
    """Spectra a second of ``Engine.score`` alone on ``spectra`` looped spectra, after a warm-up batch."""
    from rtsearch.batch import SpectraBatch
    from rtsearch.config import SearchConfig
    from rtsearch.database.store import load_index
    from rtsearch.scoring.backend import get_backend
    from rtsearch.scoring.database.engine import Engine

    backend = get_backend(backend_name)
    engine = Engine(load_index(index_dir), SearchConfig(), backend)
    todo = looped_spectra(data, spectra)
    engine.score(SpectraBatch.of(todo[: min(batch, 256)]))
    backend.synchronize()
    t0 = time.perf_counter()
    for i in range(0, len(todo), batch):
        engine.score(SpectraBatch.of(todo[i : i + batch]))
    backend.synchronize()
    secs = time.perf_counter() - t0
    return {"backend": backend.name, "spectra": len(todo), "seconds": round(secs, 3),
            "spectra_per_second": round(len(todo) / secs, 1)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    inputs(ap)
    ap.add_argument("--work", type=Path, default=ROOT / ".benchcache" / "search", help="inputs and peers' files")
    ap.add_argument("--peers-dir", type=Path, default=ROOT / ".gpudata" / "peers")
    ap.add_argument("--peers", default="comet,sage", help="comma-separated ('': none)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="the peers' threads")
    ap.add_argument("--numpy-spectra", type=int, default=2_000, help="spectra the NumPy engine scores")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = args.work.resolve()
    fasta, mgf = bench_files(args.data, args.proteins, args.spectra, work)
    res: dict[str, Any] = {"proteins": args.proteins, "spectra": args.spectra, "settings": SETTINGS}
    env = {**code_env(), "CUPY_CACHE_DIR": str(work / "cupy-cache")}
    subprocess.run(["rm", "-rf", env["CUPY_CACHE_DIR"], str(work / "index")], check=True)
    rows: list[tuple[str, dict[str, Any]]] = []
    res["index_build"] = whole(["index", "build", "--fasta", str(fasta), "--out", str(work / "index")], env, work)
    rows.append(("rtsearch index build (cold)", res["index_build"]))
    for run in ("cold", "warm"):
        out = work / f"rtsearch-{run}.tsv"
        r = whole(["search", str(mgf), "--index", str(work / "index"), "-o", str(out)], env, work)
        if out.is_file():
            r["rows"], r["psms_at_1pct_fdr"] = psms_at(out)
        res[f"rtsearch_{run}"] = r
        rows.append((f"rtsearch search ({run})", r))
    from rtsearch.scoring.backend import get_backend

    if get_backend("auto").is_gpu:
        res["engine_gpu"] = engine_rate(work / "index", args.data, args.spectra, "auto", 16384)
    res["engine_numpy"] = engine_rate(work / "index", args.data, args.numpy_spectra, "numpy", 512)
    runners = {"comet": run_comet, "sage": run_sage}
    for name in filter(None, args.peers.split(",")):
        try:
            res[name] = runners[name](args.peers_dir.resolve(), fasta, mgf, work, args.threads)
        except Exception as exc:  # noqa: BLE001 - a peer that fails is a result, not a crash
            res[name] = {"error": f"{type(exc).__name__}: {exc}"[-2000:]}
        rows.append((f"{name} {res[name].get('version', '')}".strip(), res[name]))
    print(f"\n{'engine':<34}{'wall s':>8}{'PSMs at 1 %':>13}")
    for name, r in rows:
        psms, error = r.get("psms_at_1pct_fdr", ""), r.get("error", "")[:80]
        print(f"{name:<34}{r.get('wall_seconds', 0):>8.2f}{psms:>13}  {error}")
    for key in ("engine_gpu", "engine_numpy"):
        if key in res:
            print(f"engine alone, {res[key]['backend']}: {res[key]['spectra_per_second']:,.0f} spectra/s")
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
