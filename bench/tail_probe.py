"""Where the offline search's tail goes — the run's discriminant and q-values (`PsmTable.finalize`) and the results
file (`write_table`) — step by step, wall-clock, on the machine it runs on (issue 17: after the last batch is
scored, these run one after the other and nothing else does).

Searches the 50,000-spectrum bench MGF against the 20,000-protein index once (`bench/search_wall.py`'s inputs, on
the best backend), then finalizes and writes the table ``--rounds`` times, each step's seconds summed by wrapping
the functions that do them (a step inside another is counted in both). One JSON line.

    python3 bench/tail_probe.py --data .gpudata/data --index-cache .benchcache/idx20k --rounds 3
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.search_phases import SPENT, timed  # noqa: E402  (a step's seconds summed by wrapping its function)


def main() -> int:
    from bench.serving import bench_inputs, emit, index_and_record
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_inputs(ap)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from bench.bulk_bench import looped_spectra, write_mgf
    from rtsearch.config import load_config
    from rtsearch.io import results
    from rtsearch.scoring.backend import get_backend
    from rtsearch.search import database, lda, table
    from rtsearch.search.database import DatabaseTarget
    from rtsearch.search.offline import search_runs

    _, res, index = index_and_record(args.data, args.proteins, args.index_cache)
    del index
    target = DatabaseTarget.open(args.index_cache, load_config(None).search, get_backend("auto"))
    res["backend"] = target.backend.name
    with tempfile.TemporaryDirectory() as tmp_s:
        mgf = Path(tmp_s) / "bulk.mgf"
        write_mgf(looped_spectra(args.data, args.spectra), mgf)
        scored, _ = search_runs([mgf], target, batch_size=4096)
        for owner, attr, step in ((table.PsmTable, "finalize", "finalize"), (DatabaseTarget, "fit_run", "fit_run"),
                                  (database, "fit", "fit (lda)"), (lda, "rank_features", "rank_features"),
                                  (lda, "fisher", "fisher"), (database, "q_values", "q_values (fit_run)"),
                                  (database, "confident", "confident"), (database, "rt_error", "rt_error"),
                                  (database, "sibling_evidence", "sibling_evidence"),
                                  (database, "recenter_ppm", "recenter_ppm"), (table, "q_values", "q_values (table)"),
                                  (table, "peptide_q_values", "peptide_q_values"), (table, "peps", "peps"),
                                  (results, "write_table", "write_table"), (table.PsmTable, "columns", "columns"),
                                  (results, "_tsv_parts", "tsv parts (generator made)"),
                                  (results, "write_columns", "write_columns")):  # fmt: skip
            timed(owner, attr, step)
        rounds = []
        for _ in range(args.rounds):
            t = copy.copy(scored)
            t.q = None
            SPENT.clear()
            t0 = time.perf_counter()
            t.finalize()
            t1 = time.perf_counter()
            results.write_table(t, Path(tmp_s) / "o.tsv")
            t2 = time.perf_counter()
            rounds.append({"finalize_s": round(t1 - t0, 4), "write_s": round(t2 - t1, 4),
                           "steps": {k: round(v, 4) for k, v in SPENT.items()}})  # fmt: skip
            print(rounds[-1], flush=True)
    res["rounds"] = rounds
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
