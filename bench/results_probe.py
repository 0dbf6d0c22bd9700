"""What building a batch's results costs the engine thread: `LiveRun.add_scored`, profiled.

The engine is `bench/shell_probe.py`'s `InstantEngine` (canned best matches for real peptides of the demo
index), so only the results stage is measured: naming the matches (ProForma, proteins), the running
q-values and the live discriminant, the table. Prints ms a batch, µs a spectrum (under the profiler) and
the costliest functions.

    python bench/results_probe.py [--batch 512] [--batches 40] [--top 18]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.shell_probe import demo_batch, instant_target  # noqa: E402
from rtsearch.search.live import LiveRun  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--top", type=int, default=18)
    args = ap.parse_args()
    target = instant_target()
    scored = target.score(demo_batch(args.batch))
    live = LiveRun("probe", target)
    for _ in range(3):  # the first refits of the live discriminant
        live.add_scored(scored)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(args.batches):
        live.add_scored(scored)
    prof.disable()
    per_batch = (time.perf_counter() - t0) / args.batches
    print(f"add_scored, {args.batch} spectra a batch: {per_batch * 1e3:.2f} ms a batch, "
          f"{per_batch / args.batch * 1e6:.1f} µs a spectrum (under the profiler)")  # fmt: skip
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
