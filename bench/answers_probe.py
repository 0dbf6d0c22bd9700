"""What a scored batch costs the daemon's results thread, as the daemon builds it: `scored_answers` over its runs.

The daemon's runs (`rtsearch.serve.finish.Finisher.new_run`: refits deferred, running q-values off a curve at most
`LIVE_Q_REFRESH` of the run old, every batch journaled to disk) each get a history of ``--history`` PSMs, then
batches of ``--batch`` spectra whose rows belong to ``--runs`` runs (as four `rt_load.py` senders' runs share a
batch) go through `rtsearch.serve.publish.scored_answers`, timed (ms a batch, µs a spectrum), then once more under
cProfile. Its matches come named, as from an engine process or a cluster worker. The engine is
`bench/shell_probe.py`'s `InstantEngine` (real peptides of the demo index, canned scores).

    python bench/answers_probe.py --batch 32 --runs 4 [--batches 400] [--top 15]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.shell_probe import demo_batch, instant_target  # noqa: E402
from rtsearch.search.live import LiveRun, named  # noqa: E402
from rtsearch.serve.finish import LIVE_Q_REFRESH  # noqa: E402
from rtsearch.serve.jobs import Jobs, RunState, Stamps  # noqa: E402
from rtsearch.serve.journal import Journals  # noqa: E402
from rtsearch.serve.publish import scored_answers  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=4, help="runs sharing each batch")
    ap.add_argument("--history", type=int, default=20_000, help="PSMs each run holds before the timing")
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--merge", type=int, default=1, help="batches answered together, as the results thread takes "
                    "those queued behind its batch (timed against as many answered one at a time)")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    target = instant_target()
    batch = demo_batch(args.batch)
    scored = named(target, target.score(batch))  # named where it was scored, as by an engine process or worker
    with tempfile.TemporaryDirectory() as tmp:
        journals = Journals(tmp, target)
        states = []
        for r in range(args.runs):
            journal = journals.open(f"run{r}")
            live = LiveRun(f"run{r}", target, refits="deferred", q_refresh=LIVE_Q_REFRESH, sink=journal.append)
            states.append(RunState(live))
        big = target.score(demo_batch(2000))
        for state in states:  # each run's history (refits due are left undone, as while the refit process works)
            for _ in range(args.history // 2000):
                state.live.add_scored(big)
        now = np.full(len(batch), time.monotonic_ns(), np.int64)
        stamps = Stamps(now, now, now, np.full(len(batch), 10**9, np.int64), np.zeros(len(batch), bool))
        jobs = Jobs(batch, stamps, (np.arange(len(batch)) % args.runs).astype(np.int32), states)
        for _ in range(20):
            scored_answers([(jobs, scored)])
        together = [(jobs, scored)] * args.merge
        apart = [[(jobs, scored)]] * args.merge
        for label, calls in (("one at a time", apart), (f"{args.merge} together", [together])):
            t0 = time.perf_counter()
            for _ in range(args.batches // args.merge):
                for call in calls:
                    scored_answers(call)
            per = (time.perf_counter() - t0) / (args.batches // args.merge * args.merge)
            print(f"scored_answers, {args.batch} spectra of {args.runs} runs a batch, {args.history:,} PSMs a run "
                  f"before, {label}: {per * 1e3:.3f} ms a batch, {per / args.batch * 1e6:.1f} µs a spectrum",
                  flush=True)  # fmt: skip
            if args.merge == 1:
                break
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.batches // args.merge):
            scored_answers(together)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
        journals.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
