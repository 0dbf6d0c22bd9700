"""Seconds of `rtsearch.search.lda.best_feature` (the discriminant's first direction) on seeded PSMs × 25
features (50,000 by default), best and median of 7; run it in two checkouts to compare (issue 17's FDR phase), or
with ``--threaded-min`` 0 and a large one for threads against one thread (`lda.THREADED_MIN`).

    python bench/best_feature_probe.py [--code OTHER_CHECKOUT] [--rows N] [--threaded-min N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--threaded-min", type=int, help="lda.THREADED_MIN for this run (checkouts that have it)")
    args = ap.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    from rtsearch.search import lda
    from rtsearch.search.lda import best_feature

    if args.threaded_min is not None:
        lda.THREADED_MIN = args.threaded_min

    rng = np.random.default_rng(1)
    n, k = args.rows, 25
    z = rng.normal(size=(n, k))
    decoy = rng.random(n) < 0.4
    z[~decoy, 0] += 1.0  # the feature that separates
    z[:, 5] = 0.0  # a feature not fitted
    z[:, 6] = rng.integers(0, 20, n)  # a count
    times = []
    for _ in range(7):
        t = time.perf_counter()
        b = best_feature(z, decoy)
        times.append(time.perf_counter() - t)
    print(f"best_feature {min(times):.4f} s best, {float(np.median(times)):.4f} median; direction "
          f"{np.flatnonzero(b).tolist()} {b[np.flatnonzero(b)].tolist()} ({args.code}, {n} rows, threads from "
          f"{getattr(lda, 'THREADED_MIN', 'none')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
