"""Do the daemon's running q-values hold their 1 %? The dev runs with a 1:1 entrapment, replayed live (issue 17).

`bench/entrapment.py` checks the results file (the run-end fit); a lab acting on answers during acquisition
reads each one's running q-value (``status: identified`` at q ≤ 0.01, `rtsearch.search.live`). Here each dev run
is replayed through a daemon (NumPy, in this process, loopback ports, ``--rate`` spectra/s) serving the run's
database plus its shuffled entrapment (the indexes `bench/entrapment.py` builds, kept in ``--work``), and the
answers counted: identified targets, those of entrapment proteins only, the estimates as there (FDP ≈ 2 ×
entrapment / accepted). One JSON line per run, ``"mode": "live"``, and the results file's counts beside them
(``"mode": "run end"``); then the pooled lines.

    python bench/live_entrapment.py --data ../shared/data --work /tmp/entrapw [--runs BSA1,demo] [--rate 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from bench.entrapment import PREFIX, count, estimate, index_of, pooled  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.search.database import DatabaseTarget  # noqa: E402
from rtsearch_sim.replay import load_run  # noqa: E402
from tests.devruns import DEV_RUNS, DevRun  # noqa: E402
from tests.streaming import replay_through, running, serve_config  # noqa: E402


async def live(dev: DevRun, data: Path, work: Path, rate: float) -> list[dict[str, Any]]:
    """``dev`` replayed through a daemon on its entrapment index: the live answers' counts and the run end's."""
    target = DatabaseTarget.open(index_of(dev, data, work), dev.search_config(), get_backend("numpy"))
    folder = work / f"live-{dev.name}"
    shutil.rmtree(folder, ignore_errors=True)
    async with running(target, serve_config(folder)) as daemon:
        sent, col = await replay_through(daemon, [(dev.name, load_run(dev.paths(data)[1]))], rate=rate)
    lost = col.report(sent.ms2).lost
    accepted = [r for r in col.results() if r.get("status") == "identified"]
    entrapment = sum(all(p.startswith(PREFIX) for p in r.get("proteins") or [""]) for r in accepted)
    (results,) = (folder / "results").glob("*.tsv")
    return [{"run": dev.name, "mode": "live", "lost": lost, **estimate(len(accepted), entrapment)},
            {"run": dev.name, "mode": "run end", **count(results)}]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--runs", default=",".join(d.name for d in DEV_RUNS))
    ap.add_argument("--work", type=Path, help="databases, indexes and results (default: a temp folder)")
    ap.add_argument("--rate", type=float, default=500.0, help="spectra/s replayed (default 500)")
    args = ap.parse_args()
    runs = [d for d in DEV_RUNS if d.name in args.runs.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = (args.work or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        lines = [x for d in runs for x in asyncio.run(live(d, args.data.resolve(), work, args.rate))]
    for mode in ("live", "run end"):
        mine = [x for x in lines if x["mode"] == mode]
        for line in [*mine, *({**p, "mode": mode} for p in pooled(mine))]:
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
