"""Where a lone top-down spectrum's time goes (issue 18: the daemon answers spectra one at a time at 10/s).

The FLASHApp run's MS2 spectra searched one per `search_batch` call, as the daemon's batches of one are, after
``--warm`` spectra that compile the kernels; the per-spectrum wall (p50, p90, max) and a cProfile of the timed
ones (functions by cumulative time). Device work is waited for where the host reads results, so its time lands
in the caller that reads them.

    python3 bench/topdown_profile.py --data .gpudata/data --backend cupy [--spectra 40] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.peers import cpu_model  # noqa: E402
from rtsearch.config import ProteoformConfig, TopDownConfig  # noqa: E402
from rtsearch.database.fasta import read_fasta  # noqa: E402
from rtsearch.io.msalign import read_msalign  # noqa: E402
from rtsearch.proteoforms.database import build_proteoforms  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.scoring.topdown.search import search_batch  # noqa: E402
from rtsearch.scoring.topdown.truncation import Positions  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--backend", default="cupy", choices=["numpy", "cupy"])
    ap.add_argument("--spectra", type=int, default=40, help="spectra timed, one a call")
    ap.add_argument("--warm", type=int, default=3, help="spectra searched first, untimed")
    ap.add_argument("--top", type=int, default=30, help="profile lines printed")
    args = ap.parse_args()
    folder = args.data / "topdown-flashapp-ecoli"
    db = build_proteoforms(read_fasta(folder / "example_database.fasta"), ProteoformConfig())
    spectra = [s for s in read_msalign(folder / "toppic_ms2.msalign") if not s.problem]
    settings = TopDownConfig()
    xp = get_backend(args.backend).xp
    positions = Positions(db, xp) if settings.truncations else None
    for sp in spectra[: args.warm]:
        search_batch(db, [sp], settings, positions, xp=xp)
    timed = spectra[args.warm : args.warm + args.spectra]
    walls = []
    prof = cProfile.Profile()
    for sp in timed:
        t0 = time.perf_counter()
        prof.enable()
        search_batch(db, [sp], settings, positions, xp=xp)
        prof.disable()
        walls.append(time.perf_counter() - t0)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(args.top)
    print(text.getvalue())
    ms = np.array(walls) * 1e3
    pct = {f"ms_p{q}": round(float(np.percentile(ms, q)), 2) for q in (50, 90, 99)}
    print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
                      "backend": args.backend, "spectra": len(timed), **pct, "ms_max": round(float(ms.max()), 2),
                      "mean_masses": round(float(np.mean([len(s.mass) for s in timed])), 1)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
