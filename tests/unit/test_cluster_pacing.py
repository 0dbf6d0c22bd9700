"""A cluster's batches in flight and when its engine threads take them (`rtsearch.serve.engine.pacing`,
`rtsearch.serve.engine.pacing.CLUSTER_DEPTH`): golden values by hand, then the pool against a one-GPU cluster whose
batches each cost the daemon's side `HOST_S` and the GPU `GPU_S`: with one batch in flight the GPU waits while the
daemon works; with two it is kept busy, and the second batch, taken just in time, hardly waits at the worker."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import ServeConfig, load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import LiveRun
from rtsearch.serve.engine import workers
from rtsearch.serve.engine.jobs import Jobs, RunState, Stamps
from rtsearch.serve.engine.pacing import HostTime, Lanes

MS = 1_000_000
HOST_S, GPU_S = 0.02, 0.06  # a batch's time on the daemon's side (half before its worker, half after), on the GPU


def _lanes(n: int, host_ms: float) -> Lanes:
    lanes = Lanes(n, 1 * MS)  # `LEAD_MS`
    lanes.host.seconds = host_ms / 1e3
    return lanes


def test_a_lane_holding_no_batch_takes_one_at_once_else_just_before_it_is_free():
    lanes, due = _lanes(2, 4.0), {}
    now = 100 * MS
    assert lanes.free_at(due, 0, now) == now and lanes.hold_ns(due, 0, now) == 0
    lanes.book(due, 1, 0, 30 * MS, now)  # lane 0 scores batch 1 until 130 ms
    assert due == {1: 130 * MS} and lanes.free_at(due, 0, now) == 130 * MS
    assert lanes.earliest(due, now) == now  # lane 1 is free
    # lane 0's next batch is taken the daemon's own time (4 ms) and the lead (1 ms) before 130 ms
    assert lanes.hold_ns(due, 0, now) == 25 * MS and lanes.hold_ns(due, 1, now) == 0
    lanes.book(due, 2, 1, 20 * MS, now)
    assert lanes.earliest(due, now) == 120 * MS


def test_only_a_wait_behind_the_lanes_own_batch_was_booked():
    # batch 1 on a free lane 0; batch 2 booked behind it (its wait at the worker predicted); batch 3 on lane 1, free
    # when booked: a wait it meets at its worker (behind another lane's batch, workers shared) was not predicted
    lanes, due, now = _lanes(2, 4.0), {}, 100 * MS
    lanes.book(due, 1, 0, 30 * MS, now)
    lanes.book(due, 2, 0, 30 * MS, now)
    lanes.book(due, 3, 1, 30 * MS, now)
    assert [lanes.own_wait(m) for m in (1, 2, 3)] == [False, True, False]
    lanes.settle(due, 1, 131 * MS)  # batch 2 runs now: its wait was still the booked one
    assert lanes.own_wait(2) and not lanes.own_wait(1)
    lanes.settle(due, 2, 160 * MS)
    assert not lanes.own_wait(2) and lanes.chained == set()


def test_with_the_worth_rule_a_batch_too_small_for_its_fixed_cost_waits_for_the_lane_to_be_free():
    from rtsearch.serve.engine.batching import EngineTimeModel

    lanes, due = _lanes(1, 4.0), {}
    lanes.worth = True
    model = EngineTimeModel(fixed_s=0.010, per_item_s=0.0005)  # worth it from 20 spectra
    now = 100 * MS
    lanes.book(due, 1, 0, 30 * MS, now)  # in flight until 130 ms
    assert lanes.hold_ns(due, 0, now, 19, 4096, model) == 30 * MS  # until the lane is free
    assert lanes.hold_ns(due, 0, now, 20, 4096, model) == 25 * MS  # just in time: 4 ms + 1 ms before
    # not past the patience: the first spectrum waiting has spent its share of its budget at 112 ms
    assert lanes.hold_ns(due, 0, now, 19, 4096, model, patient_until=112 * MS) == 12 * MS
    assert lanes.hold_ns(due, 0, 115 * MS, 19, 4096, model, patient_until=112 * MS) == 0
    lanes.worth = False
    assert lanes.hold_ns(due, 0, now, 19, 4096, model) == 25 * MS
    assert lanes.hold_ns({}, 0, now, 1, 4096, model) == 0  # a free lane takes even one at once


def test_with_the_worth_rule_a_free_lane_waits_for_the_other_lanes_but_an_idle_cluster_takes_at_once():
    from rtsearch.serve.engine.batching import EngineTimeModel

    lanes, due = _lanes(2, 4.0), {}
    lanes.worth = True
    model = EngineTimeModel(fixed_s=0.010, per_item_s=0.0005)  # worth it from 20 spectra
    now = 100 * MS
    assert lanes.hold_ns(due, 1, now, 5, 4096, model) == 0  # nothing in flight: at once
    lanes.book(due, 1, 0, 30 * MS, now)  # lane 0 scores until 130 ms; lane 1 is free
    assert lanes.hold_ns(due, 1, now, 5, 4096, model) == 30 * MS  # waits for lane 0's batch to come back
    assert lanes.hold_ns(due, 1, now, 5, 4096, model, patient_until=110 * MS) == 10 * MS  # not past its patience
    assert lanes.hold_ns(due, 1, now, 20, 4096, model) == 0  # worth its fixed cost: at once
    # lane 0, behind its own batch, leaves them to the free lane even when their patience has run out
    assert lanes.hold_ns(due, 0, now, 5, 4096, model, patient_until=110 * MS) == 30 * MS
    lanes.book(due, 2, 1, 20 * MS, now)  # both lanes busy: the first free takes them, or the patience ends it
    assert lanes.hold_ns(due, 0, now, 5, 4096, model, patient_until=110 * MS) == 10 * MS


def test_a_batch_queued_behind_another_is_timed_from_it_and_moved_when_that_one_comes_back():
    lanes, due = _lanes(1, 4.0), {}
    lanes.book(due, 1, 0, 30 * MS, 100 * MS)  # at an idle worker
    assert due == {1: 130 * MS} and lanes.behind == {}
    # batch 2 taken at 120 ms, 30 ms: scored after batch 1, its 4 ms trip overlapping it
    lanes.book(due, 2, 0, 30 * MS, 120 * MS)
    assert due[2] == 156 * MS and lanes.behind == {2: 1}
    lanes.book(due, 3, 0, 30 * MS, 125 * MS)  # behind batch 2
    assert due[3] == 182 * MS and lanes.behind == {2: 1, 3: 2}
    # batch 1 comes back 5 ms late: 2 and 3 move by 5 ms; 2 runs now
    lanes.settle(due, 1, 135 * MS)
    assert due == {2: 161 * MS, 3: 187 * MS} and lanes.behind == {3: 2}
    lanes.settle(due, 2, 160 * MS)  # 1 ms early: 3 moves by -1 ms
    assert due == {3: 186 * MS} and lanes.behind == {} and lanes.lane_of == {3: 0}
    # a lane whose last batch is predicted to end within the daemon's own time: taken at once, behind nothing
    lanes.book(due, 4, 0, 30 * MS, 183 * MS)
    assert due[4] == 213 * MS and lanes.behind == {}


def test_the_batchers_queue_spreads_over_the_lanes_and_overlaps_the_daemons_own_time():
    # two workers side by side: fixed 4 ms (1 ms of it the daemon's own, done while a worker scores the batch
    # before), 1 ms a spectrum, batches of at most 3; 2 spectra waiting; the engine busy until 10 ms
    from rtsearch.serve.engine.batching import BatchPolicy, EngineTimeModel, MicroBatcher
    from tests.fakeclock import FakeClock

    clock = FakeClock()
    b = MicroBatcher(BatchPolicy(max_batch=3), EngineTimeModel(fixed_s=0.004, per_item_s=0.001), clock)
    b.lanes, b.overlap_s = 2, 0.001
    b.add(np.array([1, 2]), mass=np.array([500.0, 600.0]), budget_ms=np.full(2, 1000.0))
    clock.ns = 2 * MS
    done = b.predicted_done(6, busy_until_ns=10 * MS)
    # spectra 3..8 of the queue: 2, 2, 3, 3, 4, 4 a lane, in 1, 1, 1, 1, 2, 2 batches -> 10 + 4*b - 1*(b-1) + those
    assert (done / MS).tolist() == [10 + 4 + 2, 10 + 4 + 2, 10 + 4 + 3, 10 + 4 + 3, 10 + 7 + 4, 10 + 7 + 4]
    for n, busy in ((6, 10 * MS), (1, 0)):
        assert b.predicted_last(n, busy_until_ns=busy) == int(b.predicted_done(n, busy_until_ns=busy)[-1])


def test_the_waiting_spectra_age_from_the_first_arrival_towards_the_first_deadline():
    # what the worth rule's patience waits for (`MicroBatcher.aged_at`)
    from rtsearch.serve.engine.batching import BatchPolicy, EngineTimeModel, MicroBatcher
    from tests.fakeclock import FakeClock

    clock = FakeClock()
    b = MicroBatcher(BatchPolicy(), EngineTimeModel(), clock)
    assert b.aged_at(0.25) == 2**63 - 1  # nothing waits
    clock.ns = 3 * MS
    b.add(np.array([1]), mass=np.array([1000.0]), budget_ms=np.array([40.0]))  # deadline 43 ms
    clock.ns = 5 * MS
    b.add(np.array([2]), mass=np.array([1100.0]), budget_ms=np.array([20.0]))  # deadline 25 ms: the first
    assert b.aged_at(0.25) == 8_500_000  # 3 + 0.25 * (25 - 3) = 8.5 ms
    assert b.aged_at(1.0) == 25 * MS


def test_the_daemons_own_time_a_batch_leaves_out_its_wait_and_work_at_the_worker():
    host = HostTime()
    host.observe(0.050, 0.010, 0.030)
    assert host.seconds == pytest.approx(0.010)
    for _ in range(200):  # smoothed towards what it sees
        host.observe(0.040, 0.0, 0.036)
    assert host.seconds == pytest.approx(0.004, abs=1e-5)


class OneGpu:
    """What the pool sees of a one-worker cluster (`rtsearch.cluster.door.ClusterScorer`): each batch costs
    ``HOST_S`` outside the worker and ``GPU_S`` on its one GPU, one batch at a time; its answers say how long each
    queued there and was scored, as the door's do."""

    mode = "replicate"

    def __init__(self, target: DatabaseTarget) -> None:
        self.target, self.gpu = target, threading.Lock()
        self.busy: list[tuple[float, float]] = []  # the GPU's (start, end) a batch
        self.queued: list[float] = []

    def score(self, batch: SpectraBatch, *, worker: int = -1):
        time.sleep(HOST_S / 2)  # gathered, pickled, sent
        arrived = time.perf_counter()
        with self.gpu:
            start = time.perf_counter()
            out = self.target.score(batch)
            time.sleep(max(0.0, GPU_S - (time.perf_counter() - start)))
            end = time.perf_counter()
        self.busy.append((start, end))
        self.queued.append(start - arrived)
        out.stages.update(queued=start - arrived, scoring=end - start)
        time.sleep(HOST_S / 2)  # sent back, unpickled
        return out

    def __exit__(self, *exc) -> None:
        pass


async def _serve(demo_index, monkeypatch, depth: int) -> OneGpu:
    """2 s of a spectrum every 4 ms through the pool in front of `OneGpu`, ``depth`` batches in flight."""
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    cluster = OneGpu(target)
    monkeypatch.setattr(workers, "open_cluster", lambda *a: cluster)
    monkeypatch.setenv("RTSEARCH_CLUSTER_DEPTH", str(depth))
    # its GPU's time does not grow with the batch: no batch behind another is worth its fixed cost, and with the
    # worth rule the lane would wait to be free each time (the rule's own test is above)
    monkeypatch.setenv("RTSEARCH_CLUSTER_WORTH", "0")
    answered: list[int] = []
    pool = workers.WorkerPool(target, ServeConfig(cluster=1, max_batch=64, max_queue=10_000),
                              answer=lambda a: answered.extend(len(r.scan) for _, r, _ in a),
                              refitter=type("NoRefits", (), {"refit": lambda self, states: None})(),
                              record=lambda *a: None)  # fmt: skip
    await pool.start()
    assert len(pool._threads) == depth
    spectra = list(read_spectra(bundled(RUN)))
    state = RunState(LiveRun("paced", target))
    cluster.busy.clear()
    cluster.queued.clear()
    sent = 500
    for k in range(sent):
        s = replace(spectra[k % len(spectra)], scan=k)
        now = time.monotonic_ns()
        col = np.full(1, now, np.int64)
        stamps = Stamps(col, col, col, np.full(1, 10**10, np.int64), np.zeros(1, bool))
        assert pool.enqueue(Jobs(SpectraBatch.of([s]), stamps, np.zeros(1, np.int32), [state])) == []
        await asyncio.sleep(0.004)
    while sum(answered) < sent:
        await asyncio.sleep(0.01)
    pool.close()
    assert await pool.join(10)
    return cluster


def _busy_share(cluster: OneGpu) -> float:
    """The GPU's busy share from its first batch to its last (those of the steady feed)."""
    first, last = cluster.busy[0][0], cluster.busy[-1][1]
    return sum(end - start for start, end in cluster.busy) / (last - first)


def _gaps(cluster: OneGpu) -> np.ndarray:
    """The GPU's idle time between one batch and the next, seconds."""
    busy = np.array(cluster.busy)
    return busy[1:, 0] - busy[:-1, 1]


@pytest.mark.asyncio
async def test_two_batches_in_flight_keep_the_gpu_busy_and_the_second_hardly_queues(demo_index, monkeypatch):
    one = await _serve(demo_index, monkeypatch, 1)
    two = await _serve(demo_index, monkeypatch, 2)
    # one in flight: the GPU waits out each batch's HOST_S between batches (its busy share 0.75 when scoring takes
    # GPU_S, more on a busy machine where the NumPy scoring behind it takes longer); two: it hardly waits (a busy
    # share of ~1, 0.89 on a 2-core machine beside two CPU-bound processes, whose host side then feeds it late)
    assert _gaps(one).min() >= HOST_S, _gaps(one).min()
    assert np.median(_gaps(two)) < HOST_S / 2 and _busy_share(two) > 0.85, (np.median(_gaps(two)), _busy_share(two))
    # taken just in time: a batch waits at the worker a few ms (taken as soon as its thread is free, it would wait
    # about GPU_S - HOST_S: 40 ms), a quarter of a batch's time on the GPU as measured here
    gpu = np.median([end - start for start, end in two.busy])
    assert np.median(two.queued) < 0.25 * gpu, (np.median(two.queued), gpu)
