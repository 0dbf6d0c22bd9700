"""The daemon's engine threads in front of a fake GPU cluster (issue 21): how batches are cut and paced, no device.

`rtsearch.serve.workers.WorkerPool` with ``[serve] cluster = N`` whose `ClusterScorer` is replaced by ``--gpus``
fake workers: each batch costs ``--host-ms`` on the daemon's side (half before its worker, half after) and
``--fixed-ms`` + ``--per-ms`` a spectrum on its GPU (one batch at a time a GPU, a lock); the answers are the demo
target's, scored once beforehand; ``--daemon-ms`` of Python (holding the GIL) a batch stand for the daemon's own
work on its answers (the results thread: naming, q-values, publishing). Spectra are queued at ``--rates`` for
``--seconds`` each, with ``--budget-ms``; per depth (``RTSEARCH_CLUSTER_DEPTH``) and rate: spectra refused at the
door of the pool (predicted late, queue full), batches, their mean size, each GPU's busy share, the median wait of a
batch at its GPU; with ``--door``, spectra are first screened as an intake process screens them, by the pool's
advice (`rtsearch.serve.admission`: ``door``, then ``refused`` by the pool itself), and the spectra scored a second;
the p50 / p99 / max latency of the pool's answers (receipt to the answer callback).
It does not carry the daemon's real costs (intake processes, the door's pickling): a tool to see the pacing's and
the admission's logic, not a benchmark.

    RTSEARCH_EXPIRY_SLACK_MS=5 python bench/pacing_fake.py --gpus 2 --depths 1,2 --rates 3000,6000,9000 [--daemon-ms 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled, cached_index
from rtsearch.cluster.partition import owners, spectrum_masses
from rtsearch.config import ServeConfig, load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.matches import STATUSES
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import LiveRun
from rtsearch.serve import workers
from rtsearch.serve.admission import Advice, late_rows
from rtsearch.serve.chunks import FLOAT_COLUMNS, INT_COLUMNS
from rtsearch.serve.finish import LIVE_Q_REFRESH
from rtsearch.serve.jobs import Jobs, RunState, Stamps
from rtsearch.types import ResultStatus


class FakeCluster:
    """What the pool sees of a cluster (`rtsearch.cluster.door.ClusterScorer.score`): replicate, or with ``mode``
    "partition" the mass range cut in a piece a GPU (`_spread`)."""

    mode = "replicate"

    def __init__(self, target: DatabaseTarget, spectra: list, gpus: int, host_s: float, fixed_s: float, per_s: float
                 ) -> None:  # fmt: skip
        self.answers, self.n = target.score(SpectraBatch.of(spectra)), len(spectra)
        self.gpus, self.host_s, self.fixed_s, self.per_s = gpus, host_s, fixed_s, per_s
        self.locks = [threading.Lock() for _ in range(gpus)]
        self.outstanding, self.guard = [0] * gpus, threading.Lock()
        self.busy: list[list[tuple[float, float]]] = [[] for _ in range(gpus)]
        self.queued: list[float] = []
        self.sizes: list[int] = []
        # partition: the mass range cut where as many of the run's spectra lie in each piece (`_spread`)
        mass = spectrum_masses(np.array([s.precursor_mz for s in spectra]), [s.charges for s in spectra])
        cuts = np.quantile(mass, np.arange(1, gpus) / gpus)
        self.pieces = SimpleNamespace(serves=[(-np.inf, np.inf)] * gpus, cuts=SimpleNamespace(cuts=cuts))

    def score(self, batch: SpectraBatch, *, worker: int = -1):
        if self.mode == "partition":
            return self._spread(batch)
        with self.guard:
            g = worker if worker >= 0 else min(range(self.gpus), key=self.outstanding.__getitem__)
            self.outstanding[g] += len(batch)
        time.sleep(self.host_s / 2)
        arrived = time.perf_counter()
        with self.locks[g]:
            start = time.perf_counter()
            out = self.answers.take(np.asarray(batch.scan) % self.n)
            out.native_id = list(batch.native_id)
            time.sleep(max(0.0, self.fixed_s + self.per_s * len(batch) - (time.perf_counter() - start)))
            end = time.perf_counter()
        with self.guard:
            self.outstanding[g] -= len(batch)
            self.busy[g].append((start, end))
            self.queued.append(start - arrived)
            self.sizes.append(len(batch))
        out.stages.update(queued=start - arrived, scoring=end - start)
        time.sleep(self.host_s / 2)
        return out

    def _spread(self, batch: SpectraBatch):
        """Partition: the batch's spectra to the owners of their neutral masses (`pieces`: the mass range cut in
        ``gpus`` pieces of as many of the run's spectra each), each part on its GPU side by side, ``fixed`` + ``per``
        a spectrum of it; the batch back when every part is (as `rtsearch.cluster.door.ClusterScorer` waits)."""
        time.sleep(self.host_s / 2)
        home = owners(spectrum_masses(batch.precursor_mz, batch.charges), self.pieces.cuts.cuts)
        spans: list[tuple[float, float, float]] = []

        def part(g: int, n: int) -> None:
            arrived = time.perf_counter()
            with self.locks[g]:
                start = time.perf_counter()
                time.sleep(self.fixed_s + self.per_s * n)
                end = time.perf_counter()
            with self.guard:
                self.busy[g].append((start, end))
                spans.append((arrived, start, end))

        threads = [threading.Thread(target=part, args=(g, int(np.count_nonzero(home == g))))
                   for g in np.unique(home).tolist()]  # fmt: skip
        for t in threads:
            t.start()
        out = self.answers.take(np.asarray(batch.scan) % self.n)
        out.native_id = list(batch.native_id)
        for t in threads:
            t.join()
        with self.guard:
            self.queued.append(max(start - arrived for arrived, start, _ in spans))
            self.sizes.append(len(batch))
        out.stages.update(queued=max(s - a for a, s, _ in spans), scoring=max(e - s for _, s, e in spans))
        time.sleep(self.host_s / 2)
        return out

    def __exit__(self, *exc: object) -> None:
        pass


def _hold_gil(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def run(args: argparse.Namespace, depth: int, rate: float) -> dict:
    index, _ = cached_index(Path(args.cache))
    target = DatabaseTarget(index, load_config(bundled(TOML)).search, get_backend("numpy"))
    spectra = list(read_spectra(bundled(RUN)))
    fake = FakeCluster(target, spectra, args.gpus, args.host_ms / 1e3, args.fixed_ms / 1e3, args.per_ms / 1e3)
    fake.mode = args.mode
    workers.open_cluster = lambda *a: fake  # type: ignore[assignment]
    os.environ["RTSEARCH_CLUSTER_DEPTH"] = str(depth)
    no_refits = type("NoRefits", (), {"refit": lambda self, states: None})()
    latency: list[np.ndarray] = []  # ms from receipt to answer, every answer (scored or shed by the pool)
    shed_latency: list[np.ndarray] = []  # of them, the pool's shed answers (given up, predicted late)
    shed = STATUSES.index(ResultStatus.SHED.value)

    def answer(answers: list) -> None:
        now = time.monotonic_ns()
        latency.extend((now - stamps.received_mono) / 1e6 for _, _, stamps in answers)
        shed_latency.extend((now - st.received_mono[res.status == shed]) / 1e6 for _, res, st in answers)
        _hold_gil((args.daemon_ms + args.daemon_per_ms * sum(len(st.received_mono) for _, _, st in answers)) / 1e3)

    pool = workers.WorkerPool(target, ServeConfig(cluster=args.gpus, cluster_mode=args.mode, max_batch=4096,
                                                  max_queue=100_000),
                              answer=answer, refitter=no_refits, record=lambda *a: None)  # fmt: skip
    await pool.start()
    advice = pool.advice = Advice() if args.door else None  # the intake door's advice (one intake process)
    for g in fake.busy:
        g.clear()
    fake.queued.clear()
    fake.sizes.clear()
    # as the daemon's runs (`rtsearch.serve.finish`): the live discriminant's refits off the results thread (inline,
    # each refit held the results thread 20-100 ms: answers late with the fake GPUs a third busy)
    live = LiveRun("fake", target, refits="deferred", q_refresh=LIVE_Q_REFRESH)
    state, refused, sent, at_door = RunState(live), 0, 0, 0
    t0 = time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < args.seconds:
        n = int(elapsed * rate) - sent
        if n > 0:
            batch = [replace(spectra[(sent + j) % len(spectra)], scan=sent + j) for j in range(n)]
            now = time.monotonic_ns()
            col = np.full(n, now, np.int64)
            keep = np.arange(n)
            if advice is not None:  # as an intake process: the advised wait (and its slope) against each budget
                ints = np.zeros((n, len(INT_COLUMNS)), np.int64)
                ints[:, INT_COLUMNS.index("ms_level")] = 2
                floats = np.full((n, len(FLOAT_COLUMNS)), np.nan)  # no header budget: ``--budget-ms``
                late, _ = late_rows(ints, floats, wait_ns=advice.wait_ns(), default_budget_ms=args.budget_ms,
                                    slope_ns=advice.slope_ns())  # fmt: skip
                keep = np.setdiff1d(keep, late)
                at_door += n - len(keep)
                batch, col = [batch[k] for k in keep], col[: len(keep)]
            stamps = Stamps(col, col, col, np.full(len(keep), int(args.budget_ms * 1e6), np.int64),
                            np.zeros(len(keep), bool))  # fmt: skip
            jobs = Jobs(SpectraBatch.of(batch), stamps, np.zeros(len(keep), np.int32), [state])
            refused += sum(len(out) for out, _, _ in pool.enqueue(jobs))
            sent += n
        await asyncio.sleep(0.002)
    await asyncio.sleep(0.5)
    pool.close()
    await pool.join(10)
    return {"depth": depth, "offered_hz": rate, "sent": sent, "door": at_door, "refused": refused,
            "scored_per_s": round(sum(fake.sizes) / args.seconds), "batches": len(fake.sizes),
            "mean_batch": round(float(np.mean(fake.sizes)), 1) if fake.sizes else 0.0,
            "busy": [round(sum(e - s for s, e in g) / args.seconds, 3) for g in fake.busy],
            "queued_median_ms": round(float(np.median(fake.queued)) * 1e3, 2) if fake.queued else 0.0,
            **_percentiles(latency), **{f"shed_{k}": v for k, v in _percentiles(shed_latency).items()}}  # fmt: skip


def _percentiles(latency: list[np.ndarray]) -> dict:
    """p50 / p99 / max ms of the pool's answers (not the door's sheds: those are answered at once)."""
    a = np.concatenate(latency) if latency else np.zeros(0)
    return {f"answer_{k}_ms": round(float(f(a)), 1) if a.size else None
            for k, f in (("p50", np.median), ("p99", lambda x: np.percentile(x, 99)), ("max", np.max))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--depths", default="1,2")
    ap.add_argument("--rates", default="3000,6000,9000")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--budget-ms", type=float, default=50.0)
    ap.add_argument("--host-ms", type=float, default=6.0)
    ap.add_argument("--fixed-ms", type=float, default=5.0)
    ap.add_argument("--per-ms", type=float, default=0.2)
    ap.add_argument("--daemon-ms", type=float, default=0.0, help="Python holding the GIL a batch's answers")
    ap.add_argument("--daemon-per-ms", type=float, default=0.0, help="... and more a spectrum answered")
    ap.add_argument("--mode", choices=("replicate", "partition"), default="replicate",
                    help="partition: a batch's spectra on the GPUs that own their masses, side by side")
    ap.add_argument("--door", action="store_true", help="shed at an intake door first, by the pool's advice")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "rtsearch-pacing-fake"))
    args = ap.parse_args()
    for depth in (int(d) for d in args.depths.split(",")):
        for rate in (float(r) for r in args.rates.split(",")):
            print(asyncio.run(run(args, depth, rate)), flush=True)


if __name__ == "__main__":
    main()
