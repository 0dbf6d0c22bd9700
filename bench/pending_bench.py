"""How long the engine thread takes to gather a batch's spectra from the intake chunks they came in.

`Pending.take` over ``--segments`` chunks of ``--size`` spectra each, all taken at once (what an idle engine
does), mean of ``--repeats``; the chunks are the synthetic ones of tests/unit/test_pending.py. Split into its
two steps: `Pending.claim` (the bookkeeping, under the pool's lock, which the event loop waits on to queue
spectra) and `Claim.jobs` (the columns gathered, outside it).

    python bench/pending_bench.py --segments 60,300 --size 5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rtsearch.serve.pending import Pending  # noqa: E402
from tests.unit.test_pending import _jobs  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--segments", default="60,300")
    p.add_argument("--size", type=int, default=5)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    for segments in map(int, args.segments.split(",")):
        claim_s = gather_s = 0.0
        for _ in range(args.repeats):
            pending = Pending()
            handles = np.concatenate([pending.add(_jobs(1000 * k, args.size)) for k in range(segments)])
            t0 = time.perf_counter()
            claim = pending.claim(handles)
            t1 = time.perf_counter()
            claim.jobs()
            claim_s, gather_s = claim_s + t1 - t0, gather_s + time.perf_counter() - t1
        n = args.repeats
        print(f"{segments} chunks of {args.size}: {(claim_s + gather_s) / n * 1e3:.2f} ms a take: claim (under the "
              f"lock) {claim_s / n * 1e3:.2f} ms, gathered (outside) {gather_s / n * 1e3:.2f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
