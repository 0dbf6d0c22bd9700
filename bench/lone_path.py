"""Where a lone spectrum's time goes inside the daemon, stage by stage, with an engine that answers at once.

`bench/shell_probe.py`'s daemon (the demo index scored by its `InstantEngine`, so only the daemon's own costs are
left) is fed ``--rate`` spectra a second for ``--seconds``, one message each, by ``rtsearch-sim load``; the daemon's
methods are wrapped in this process to stamp each spectrum (`time.perf_counter_ns`, the clock of the intake
process's receipt stamp ``received_mono``) as it passes: the event loop gets its chunk (`Daemon._on_spectra`), the
pool queues it (`WorkerPool.enqueue`, start and end), an engine thread claims it (`WorkerPool._wait_for_batch`) and
has taken it (`WorkerPool._take`), the engine scored it, the answer's publishing starts and ends
(`Publisher.publish`). Prints the median and p90 of each step (µs) and of the whole, from the intake's receipt to
the answer sent; at a low rate each batch is one spectrum, so the n-th of each stamp is the n-th spectrum's.

    python bench/lone_path.py [--rate 100] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

STAMPS: dict[str, list[int]] = collections.defaultdict(list)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    import shell_probe
    from stamps import stamp

    from rtsearch.serve import daemon, publish, workers

    enqueue = workers.WorkerPool.enqueue

    def queued(self: Any, jobs: Any) -> Any:
        STAMPS["0 intake received"].append(int(jobs.stamps.received_mono.max()))
        STAMPS["2 enqueue starts"].append(time.perf_counter_ns())
        out = enqueue(self, jobs)
        STAMPS["3 enqueue ends"].append(time.perf_counter_ns())
        return out

    workers.WorkerPool.enqueue = queued  # type: ignore[method-assign]
    stamp(daemon.Daemon, "_on_spectra", STAMPS["1 event loop has it"])
    stamp(workers.WorkerPool, "_wait_for_batch", STAMPS["4 engine thread claims it"], after=True)
    stamp(workers.WorkerPool, "_take", STAMPS["5 engine thread took it"], after=True)
    stamp(shell_probe.InstantEngine, "score", STAMPS["6 scored"], after=True)
    stamp(publish.Publisher, "publish", STAMPS["7 publishing starts"])
    stamp(publish.Publisher, "publish", STAMPS["8 publishing ends"], after=True)
    probe = argparse.Namespace(rates=str(args.rate), seconds=args.seconds, cache=None, run_size=50_000, profile=None,
                               cprofile=0, profile_chars=0, cprofile_sort="tottime")  # fmt: skip
    asyncio.run(shell_probe.main_async(probe))
    n = len(STAMPS["2 enqueue starts"])
    skip = {"6 scored": len(STAMPS["6 scored"]) - n}  # the warm-up's batches were scored before the first
    counts = {k: len(v) - skip.get(k, 0) for k, v in STAMPS.items()}
    if set(counts.values()) - {n, n + 1}:  # (the last take returns at the close, with nothing)
        sys.exit(f"some batch held more than one spectrum: the stamps cannot be paired ({counts}); a lower --rate")
    n -= 1
    keys = sorted(STAMPS)
    at = np.array([STAMPS[k][skip.get(k, 0) : skip.get(k, 0) + n] for k in keys], dtype=np.int64)
    for k in range(1, len(keys)):
        d = (at[k] - at[k - 1]) / 1e3
        print(f"{keys[k - 1]:>26} -> {keys[k]:<26} median {np.median(d):6.0f} µs, p90 {np.percentile(d, 90):6.0f}")
    d = (at[-1] - at[0]) / 1e3
    print(f"{'the whole':>56} median {np.median(d):6.0f} µs, p90 {np.percentile(d, 90):6.0f} ({n} spectra)")


if __name__ == "__main__":  # (spawned intake processes import this module: nothing runs then)
    main()
