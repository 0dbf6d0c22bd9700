"""The refit process's memory over many finished runs (issue 16's memory soak: the daemon's refit processes grew
while its lanes and engines stayed flat).

The bundled E. coli demo index and run, scored once on NumPy here, the scored batch repeated to ``--rows`` rows (a
long run's PSMs); then a daemon's `rtsearch.serve.refits.Refitter` finishes that run ``--runs`` times, one after the
other, as the daemon does at each run's end (final discriminant, q-values, results file), and this prints the refit
process's resident memory (``/proc/PID/smaps_rollup``) after each.

    python3 bench/refit_memory.py --rows 200000 --runs 12
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.memory_soak import memory_kb  # noqa: E402
from bench.serving import processes  # noqa: E402
from rtsearch.batch import SpectraBatch  # noqa: E402
from rtsearch.cli.demo import RUN, TOML, bundled, cached_index  # noqa: E402
from rtsearch.config import load_config  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.matches import concat_batches  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.search.database import DatabaseTarget  # noqa: E402
from rtsearch.search.live import named  # noqa: E402
from rtsearch.serve.refits import Refitter  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="PSMs a run")
    ap.add_argument("--runs", type=int, default=12, help="runs finished one after the other")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        index, _ = cached_index(tmp / "demo-cache")
        target = DatabaseTarget(index, load_config(bundled(TOML)).search, get_backend("numpy"))
        spectra = [s for s in read_spectra(bundled(RUN)) if s.ms_level == 2]
        one = named(target, target.score(SpectraBatch.of(spectra)))
        reps = -(-a.rows // len(one))
        batch = concat_batches([one] * reps).take(np.arange(a.rows))
        batch.scan = np.arange(a.rows, dtype=batch.scan.dtype)
        reopen = target.reopen()
        refitter = Refitter()
        refitter.start().result()
        pid = next(c for c, (parent, name) in processes().items() if parent == os.getpid() and name == "refit")
        print(json.dumps({"rows": a.rows, "start_mb": round(memory_kb(pid).get("rss", 0) / 1024, 1)}), flush=True)
        for k in range(a.runs):
            counts = {"identified": 0, "unidentified": a.rows, "shed": 0}
            _, path = refitter.finish(reopen, batch, f"run{k}", counts, tmp / f"run{k}.tsv").result()
            path.unlink()
            m = memory_kb(pid)
            print(json.dumps({"run": k, "rss_mb": round(m.get("rss", 0) / 1024, 1),
                              "pss_mb": round(m.get("pss", 0) / 1024, 1)}), flush=True)  # fmt: skip
        refitter.shutdown(wait=True)  # (before the folder it wrote in goes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
