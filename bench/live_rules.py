"""The running q-value's rules tried on the dev runs with a 1:1 entrapment, in process (issue 17).

`bench/live_entrapment.py` replays each run through a daemon (its refits in another process, answers as they
come); this feeds `rtsearch.search.live.LiveRun` the same runs' scored spectra in scan order, ``--batch`` at a
time with inline refits, so that the rules' settings can be compared on identical batches in seconds: the first
live discriminant at ``REFIT_FIRST`` scored PSMs, no running q before ``LIVE_FROM``, the live fit's ridge. Each
run is scored once (NumPy, one batch, the indexes `bench/entrapment.py` builds in ``--work``). Prints one JSON
line per setting: live-identified targets, those of entrapment proteins only, estimated FDP and true PSMs
(`bench.entrapment.estimate`), per run and pooled.

    python bench/live_rules.py --data ../shared/data --work /tmp/entrapw [--refit-first 100,500]
        [--live-from 0,50] [--ridge 0.001,0.1]

``--bulk N --index-cache DIR``: instead, one run of N looped bench spectra (`bench/bulk_bench.py`'s) against the
20,000-protein bench index with its ``ENTRAPMENT_`` proteins (`bench/search_bench.py`'s; built once into DIR),
``--batch 32``, a check on spectra the settings were not chosen on (its entrapment is not 1:1: the direction only).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.entrapment import PREFIX, estimate, index_of  # noqa: E402
from rtsearch.batch import SpectraBatch  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.matches import STATUSES, ScoredBatch  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.search import live  # noqa: E402
from rtsearch.search.database import DatabaseTarget  # noqa: E402
from tests.devruns import DEV_RUNS  # noqa: E402

IDENTIFIED = STATUSES.index("identified")


def replay(target: DatabaseTarget, scored: ScoredBatch, batch: int, ridge: float,
           prefix: str = PREFIX) -> tuple[int, int]:  # fmt: skip
    """Live-identified targets and those of entrapment proteins only, ``scored`` fed ``batch`` spectra at a time."""
    run = live.LiveRun("run", target, refits="inline")
    run.ridge = ridge
    accepted = entrapment = 0
    for start in range(0, len(scored), batch):
        res = run.add_scored(scored.take(np.arange(start, min(start + batch, len(scored)))))
        rows = {r: j for j, r in enumerate(np.flatnonzero(res.matched).tolist())}  # names are of matched rows
        hits = np.flatnonzero(res.status == IDENTIFIED).tolist()
        accepted += len(hits)
        entrapment += sum(all(p.startswith(prefix) for p in res.proteins[rows[k]] or [""]) for k in hits)
    return accepted, entrapment


def scored_runs(data: Path, work: Path) -> list[tuple[str, DatabaseTarget, ScoredBatch]]:
    """Each dev run's name, its entrapment target (NumPy) and its MS2 spectra scored in one batch, named."""
    runs = []
    for dev in DEV_RUNS:
        target = DatabaseTarget.open(index_of(dev, data, work), dev.search_config(), get_backend("numpy"))
        spectra = [s for s in read_spectra(dev.paths(data)[1]) if s.ms_level == 2]
        runs.append((dev.name, target, live.named(target, target.score(SpectraBatch.of(spectra)))))
    return runs


def bulk_run(data: Path, cache: Path, n: int) -> tuple[str, DatabaseTarget, ScoredBatch]:
    """``n`` looped bench spectra scored (NumPy, batches of 2,048) against the bench index, as one run."""
    from bench.bulk_bench import looped_spectra
    from bench.serving import index_and_record
    from rtsearch.config import SearchConfig
    from rtsearch.matches import concat_batches

    index_and_record(data, 20_000, cache)  # built once into ``cache``
    target = DatabaseTarget.open(cache, SearchConfig(), get_backend("numpy"))
    sp = looped_spectra(data, n)
    parts = [live.named(target, target.score(SpectraBatch.of(sp[i : i + 2048]))) for i in range(0, n, 2048)]
    return "bulk", target, concat_batches(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True, help="the entrapment indexes (built there unless there)")
    ap.add_argument("--refit-first", default="100,500", help="REFIT_FIRST values (comma-separated)")
    ap.add_argument("--live-from", default="0,50", help="LIVE_FROM values")
    ap.add_argument("--ridge", default="0.001,0.1", help="the live fit's ridge values")
    ap.add_argument("--batch", type=int, default=2, help="spectra a batch (default 2: a daemon at a few hundred /s)")
    ap.add_argument("--bulk", type=int, default=0, help="one run of this many looped bench spectra instead")
    ap.add_argument("--index-cache", type=Path, help="the bench index's folder (--bulk)")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    prefix = PREFIX
    if args.bulk:
        if args.index_cache is None:
            ap.error("--bulk needs --index-cache")
        runs, prefix = [bulk_run(args.data, args.index_cache, args.bulk)], "ENTRAPMENT_"
    else:
        runs = scored_runs(args.data, args.work)
    grid = itertools.product(*(map(float, v.split(",")) for v in (args.refit_first, args.live_from, args.ridge)))
    for refit_first, live_from, ridge in grid:
        live.REFIT_FIRST, live.LIVE_FROM = int(refit_first), int(live_from)
        per: dict[str, Any] = {name: replay(target, scored, args.batch, ridge, prefix) for name, target, scored in runs}
        pooled = estimate(sum(a for a, _ in per.values()), sum(e for _, e in per.values()))
        print(json.dumps({"refit_first": int(refit_first), "live_from": int(live_from), "ridge": ridge, **pooled,
                          "runs": {k: list(v) for k, v in per.items()}}), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
