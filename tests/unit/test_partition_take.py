"""A partition's engine threads take their piece's spectra (`rtsearch.serve.workers`, `MicroBatcher.take`'s
``within``): each batch goes whole to one piece's worker, as large as a replicate worker's, not split over all of
them in halves (two GPUs each scoring half-batches paid the fixed cost of a batch twice: bench/RESULTS.md)."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.cluster.partition import spectrum_masses
from rtsearch.config import ServeConfig, load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import LiveRun
from rtsearch.serve import workers
from rtsearch.serve.batching import BatchPolicy, EngineTimeModel, MicroBatcher
from rtsearch.serve.jobs import Jobs, RunState, Stamps

MS = 1_000_000


def _batcher(masses: list[float], now: list[int]) -> MicroBatcher:
    # spectra linger up to 1 s: a batch goes when full (3), or when its earliest deadline is near
    policy = BatchPolicy(max_batch=3, max_queue=100, linger_ms=1000.0)
    b = MicroBatcher(policy, EngineTimeModel(0.005, 0.0), lambda: now[0])
    b.add(np.arange(len(masses), dtype=np.int64), mass=np.array(masses), budget_ms=np.full(len(masses), 100.0))
    return b


def test_a_span_takes_its_own_masses_nearest_first_and_leaves_the_rest_waiting():
    now = [0]
    b = _batcher([1000.0, 1500.0, 2500.0, math.nan, 3000.0, 1200.0], now)
    low, high = (-math.inf, 2000.0), (2000.0, math.inf)
    assert b.waiting(low) == 4 and b.waiting(high) == 3  # NaN (mass unknown) in every span
    # the low span is full: its three nearest in mass to its earliest deadline's (handle 0's, at 1000 Da)
    assert b.take(workers_free=1, within=low).tolist() == [0, 5, 1]
    assert b.waiting(low) == 1 and len(b) == 3
    assert b.take(workers_free=1, within=low) is None  # NaN alone: not due
    assert b.take(workers_free=1, now=True, within=low).tolist() == [3]
    assert b.waiting(low) == 0 and b.wake_at(low) is None and b.take(workers_free=1, now=True, within=low) is None
    assert b.take(workers_free=1, within=high) is None  # two wait there, neither due nor a full batch
    assert b.wake_at(high) == 94 * MS  # due at their deadline (100 ms) less a batch (5 ms) and the margin (1 ms)
    assert sorted(b.take(workers_free=1, now=True).tolist()) == [2, 4]


def test_a_span_is_due_by_its_own_deadlines_not_the_others():
    now = [0]
    b = _batcher([1000.0], now)
    now[0] = 50 * MS
    b.add(np.array([1], np.int64), mass=np.array([2500.0]), budget_ms=np.array([100.0]))
    high = (2000.0, math.inf)
    # the high span's one spectrum is due at its deadline (150 ms) less a batch (5 ms) and the margin (1 ms)
    assert b.wake_at(high) == 144 * MS
    assert b.wake_at() == 94 * MS  # the other's, earlier
    assert b.aged_at(0.5, high) == 100 * MS


class TwoPieces:
    """What the pool sees of a partition of two pieces cut at ``cut`` Da (`rtsearch.cluster.door.ClusterScorer`):
    ``span``, and ``score`` recording each batch's neutral masses."""

    mode = "partition"

    def __init__(self, target: DatabaseTarget, cut: float) -> None:
        self.target, self.cut, self.lock = target, cut, threading.Lock()
        self.batches: list[np.ndarray] = []

    def span(self, piece: int) -> tuple[float, float]:
        return (-math.inf, self.cut) if piece == 0 else (self.cut, math.inf)

    def score(self, batch: SpectraBatch, *, worker: int = -1):
        with self.lock:
            self.batches.append(spectrum_masses(batch.precursor_mz, batch.charges))
        time.sleep(0.01)
        return self.target.score(batch)

    def __exit__(self, *exc) -> None:
        pass


@pytest.mark.asyncio
async def test_each_engine_thread_of_a_partition_takes_its_piece_only(demo_index, monkeypatch):
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    spectra = list(read_spectra(bundled(RUN)))
    cut = float(np.median(spectrum_masses(np.array([s.precursor_mz for s in spectra]), [s.charges for s in spectra])))
    cluster = TwoPieces(target, cut)
    monkeypatch.setattr(workers, "open_cluster", lambda *a: cluster)
    answered: list[int] = []
    pool = workers.WorkerPool(target, ServeConfig(cluster=2, max_batch=64, max_queue=10_000),
                              answer=lambda a: answered.extend(len(r.scan) for _, r, _ in a),
                              refitter=type("NoRefits", (), {"refit": lambda self, states: None})(),
                              record=lambda *a: None)  # fmt: skip
    await pool.start()
    state = RunState(LiveRun("paced", target))
    cluster.batches.clear()
    sent = 300
    for k in range(sent):  # in chunks of 3: several spectra wait at once, of both pieces
        chunk = [replace(spectra[(3 * k + j) % len(spectra)], scan=3 * k + j) for j in range(3)]
        now = time.monotonic_ns()
        col = np.full(3, now, np.int64)
        stamps = Stamps(col, col, col, np.full(3, 10**10, np.int64), np.zeros(3, bool))
        assert pool.enqueue(Jobs(SpectraBatch.of(chunk), stamps, np.zeros(3, np.int32), [state] * 3)) == []
        await asyncio.sleep(0.003)
    while sum(answered) < 3 * sent:
        await asyncio.sleep(0.01)
    pool.close()
    assert await pool.join(10)
    sides = [(m < cut).all() or (m >= cut).all() for m in cluster.batches]
    assert all(sides), f"{len(sides) - sum(sides)} of {len(sides)} batches held spectra of both pieces"
    low = sum(bool((m < cut).all()) for m in cluster.batches)
    assert 0 < low < len(cluster.batches)  # both pieces' threads took batches
    assert sum(len(m) for m in cluster.batches) == 3 * sent
