"""What partition mode costs the daemon a batch on its side (issue 21): `rtsearch.cluster.pieces.Pieces.route` (each
query's mass and candidates, the live cuts, the parts) and `Pieces.finish` (the parts' answers put back in order),
for batches of the demo run's spectra against the bundled E. coli index cut in two, NumPy, no cluster.

    python bench/route_cost.py [--window "200 Da"] [--sizes 30,100] [--batches 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled, cached_index
from rtsearch.cluster.partition import LiveCuts, bin_work
from rtsearch.cluster.pieces import Pieces
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.types import Tolerance


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--window", default="200 Da", help="the precursor tolerance, e.g. '20 ppm' or '200 Da'")
    ap.add_argument("--sizes", default="30,100")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "rtsearch-route-cost"))
    args = ap.parse_args()
    value, unit = args.window.split()
    index, _ = cached_index(Path(args.cache))
    cfg = replace(load_config(bundled(TOML)).search, precursor_tolerance=Tolerance(float(value), unit))
    target = DatabaseTarget(index, cfg, get_backend("numpy"))
    work, start = bin_work(index.forms.mass)
    pieces = Pieces(target, LiveCuts(work, start, 2), [(-np.inf, np.inf)] * 2, [None, None])
    spectra = [s for s in read_spectra(bundled(RUN)) if s.ms_level == 2]
    rng = np.random.default_rng(1)
    for n in (int(x) for x in args.sizes.split(",")):
        batches = [SpectraBatch.of([spectra[i] for i in rng.integers(0, len(spectra), n)])
                   for _ in range(args.batches)]  # fmt: skip
        t = time.perf_counter()
        plans = [pieces.route(b) for b in batches]
        route = (time.perf_counter() - t) / len(batches)
        answers = [[(p, target.score(b.take(p.rows))) for p in plan] for b, plan in zip(batches, plans, strict=True)]
        t = time.perf_counter()
        for b, a in zip(batches, answers, strict=True):
            pieces.finish(b, a)
        finish = (time.perf_counter() - t) / len(batches)
        print({"spectra": n, "parts": float(np.mean([len(p) for p in plans])), "route_ms": round(route * 1e3, 3),
               "finish_ms": round(finish * 1e3, 3)}, flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
