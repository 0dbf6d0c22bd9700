"""What a batch's queries cost the engine's host: `make_queries`' window lookups, in arrival order or in mass order.

Each (spectrum, charge) query's peptide window is two `np.searchsorted` lookups in the target's peptide masses
(5 M, 40 MB for the 20,000-protein bench index); from `candidates.SORTED_SEARCH_MIN` queries they are looked up in
mass order. Times both ways on the bench spectra (their own charges), best of ``--repeat``, alternating:

    python bench/queries_probe.py --data ../shared/data --index-cache .benchcache/idx20k [--sizes 512,1024,2048,4096]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulators"))

from bench.stream_bench import RUNS, get_index  # noqa: E402
from rtsearch.batch import SpectraBatch  # noqa: E402
from rtsearch.config import SearchConfig  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.scoring.database import candidates  # noqa: E402
from rtsearch.scoring.database.engine import Engine  # noqa: E402
from rtsearch_sim.replay import load_run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--index-cache", type=Path)
    ap.add_argument("--sizes", default="256,512,1024,2048,4096")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    index, _ = get_index(args.data, 20_000, args.index_cache, np)
    pool = [s for r in RUNS for s in load_run(args.data / r) if s.ms_level == 2]
    np.random.default_rng(1).shuffle(pool)  # type: ignore[arg-type]
    while len(pool) < 4096:
        pool = pool + pool
    engine = Engine(index, SearchConfig(), get_backend("numpy"))
    default = candidates.SORTED_SEARCH_MIN
    print(f"{index.mass.shape[0]:,} peptide masses; mass order from {default} queries", flush=True)
    for size in [int(x) for x in args.sizes.split(",")]:
        batch = SpectraBatch.of(pool[:size])
        ok = np.ones(size, dtype=bool)
        best = {"arrival order": np.inf, "mass order": np.inf}
        for _ in range(args.repeat):
            for way, threshold in (("arrival order", 1 << 62), ("mass order", 0)):
                candidates.SORTED_SEARCH_MIN = threshold
                t0 = time.perf_counter()
                engine.queries(batch, ok)
                best[way] = min(best[way], time.perf_counter() - t0)
        candidates.SORTED_SEARCH_MIN = default
        print(f"{size:5d} spectra: " + ", ".join(f"{w} {s * 1e3:.3f} ms" for w, s in best.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
