"""The refit process's memory over many finished runs (issue 16's memory soak: the daemon's refit processes grew
while its lanes and engines stayed flat).

The bundled E. coli demo index and run, scored once on NumPy here, the scored batch repeated to ``--rows`` rows (a
long run's PSMs); then a daemon's `rtsearch.serve.refits.Refitter` finishes that run ``--runs`` times, one after the
other, as the daemon does at each run's end (final discriminant, q-values, results file), and this prints the refit
process's resident memory (``/proc/PID/smaps_rollup``: RSS, PSS and its heap part ``Pss_Anon``) after each. With
``--index-cache`` (and ``--data``): the 20,000-protein bench index with entrapment and the dev runs' spectra, the
daemon's target in `bench/memory_soak.py`, instead.

    python3 bench/refit_memory.py --rows 200000 --runs 12
    python3 bench/refit_memory.py --rows 225000 --runs 8 --data ../shared/data --index-cache .benchcache/idx20k
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.serving import memory_kb, process_tree, processes  # noqa: E402
from bench.stream_bench import RUNS, get_index  # noqa: E402
from rtsearch.batch import SpectraBatch  # noqa: E402
from rtsearch.cli.demo import RUN, TOML, bundled, cached_index  # noqa: E402
from rtsearch.config import SearchConfig, load_config  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.matches import ScoredBatch, concat_batches  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.search.database import DatabaseTarget  # noqa: E402
from rtsearch.search.live import named  # noqa: E402
from rtsearch.serve.refits import Refitter, RunToFinish  # noqa: E402


def long_run(target: DatabaseTarget, spectra: list[Any], rows: int) -> ScoredBatch:
    """``spectra`` scored once on ``target`` and named, repeated to ``rows`` PSMs of distinct scans: a long run's
    PSMs, as a lane hands them to its refit process at the run's end."""
    one = named(target, target.score(SpectraBatch.of(spectra)))
    batch = concat_batches([one] * -(-rows // len(one))).take(np.arange(rows))
    batch.scan = np.arange(rows, dtype=batch.scan.dtype)
    return batch


def refit_pid() -> int:
    """This process's refit process (it names its main thread ``refit``; forked by this process's fork server: a
    grandchild)."""
    table = processes()
    return next(c for c in process_tree(os.getpid(), table)[1:] if table[c][1] == "refit")


def finish_settled(refitter: Refitter, reopen: Any, batch: ScoredBatch, name: str, path: Path) -> Path:
    """``batch`` finished as run ``name`` into ``path``, and then a task after it: by its end the finish, the
    give-back queued behind it, and the pool's hold on the finished call's arguments are all over."""
    counts = {"identified": 0, "unidentified": len(batch), "shed": 0}
    (done,) = refitter.finish(reopen, [RunToFinish(name, path, batch=batch, by_status=counts)]).result()
    refitter.start().result()
    assert done.path is not None, done.error
    return done.path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="PSMs a run")
    ap.add_argument("--runs", type=int, default=12, help="runs finished one after the other")
    ap.add_argument("--data", type=Path, help="the shared data folder (with --index-cache)")
    ap.add_argument("--index-cache", type=Path, help="the bench index's folder (built there once)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        if a.index_cache is None:
            index, _ = cached_index(tmp / "demo-cache")
            spectra = [s for s in read_spectra(bundled(RUN)) if s.ms_level == 2]
            cfg = load_config(bundled(TOML)).search
        else:
            index, _ = get_index(a.data, 20_000, a.index_cache, np)
            spectra = [s for run in RUNS for s in read_spectra(a.data / run) if s.ms_level == 2]
            cfg = SearchConfig()  # the daemon's, given only --index
        target = DatabaseTarget(index, cfg, get_backend("numpy"))
        batch = long_run(target, spectra, a.rows)
        reopen = target.reopen()
        refitter = Refitter()
        refitter.start().result()
        pid = refit_pid()
        print(json.dumps({"rows": a.rows, "start_mb": round(memory_kb(pid).get("rss", 0) / 1024, 1)}), flush=True)
        for k in range(a.runs):
            finish_settled(refitter, reopen, batch, f"run{k}", tmp / f"run{k}.tsv").unlink()
            m = memory_kb(pid)
            mb = {f"{x}_mb": round(m.get(x, 0) / 1024, 1) for x in ("rss", "pss", "pss_anon")}
            print(json.dumps({"run": k, **mb}), flush=True)
        refitter.shutdown()  # (before the folder it wrote in goes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
