"""The engine threads and the results thread (`rtsearch.serve.workers`): under load the engine scores the next
batch while the results thread answers the last, so a batch costs the slower of the two stages, not their sum; a
lone batch is answered by the engine thread itself; every spectrum once."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import ServeConfig, load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import LiveRun
from rtsearch.serve.jobs import Jobs, RunState, Stamps
from rtsearch.serve.workers import WorkerPool

STAGE_S = 0.05  # what scoring, and answering, each batch takes at least here


class SlowTarget:
    """The demo target, each batch's scoring made to take at least ``stage_s``."""

    def __init__(self, target: DatabaseTarget, stage_s: float = STAGE_S) -> None:
        self._target = target
        self.backend = target.backend
        self.stage_s = stage_s

    def score(self, spectra: SpectraBatch):
        t0 = time.perf_counter()
        out = self._target.score(spectra)
        time.sleep(max(0.0, self.stage_s - (time.perf_counter() - t0)))
        return out

    def __getattr__(self, name: str):
        return getattr(self._target, name)


class NoRefits:
    def refit(self, states) -> None:
        pass


def _jobs(state: RunState, spectra, now: int, budget_ns: int = 60 * 10**9) -> Jobs:
    n = len(spectra)
    col = np.full(n, now, dtype=np.int64)
    stamps = Stamps(col, col, col, np.full(n, budget_ns, np.int64), np.zeros(n, bool))
    return Jobs(SpectraBatch.of(spectra), stamps, np.zeros(n, np.int32), [state])


@pytest.mark.asyncio
async def test_the_engine_scores_while_the_results_thread_answers(demo_index):
    target = SlowTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")))
    spectra = list(read_spectra(bundled(RUN)))[:80]
    answered: list[tuple[int, ...]] = []
    threads: list[str] = []
    lock = threading.Lock()

    def answer(answers) -> None:
        time.sleep(STAGE_S)  # publishing as slow as scoring
        with lock:
            answered.extend(tuple(int(s) for s in results.scan) for _, results, _ in answers)
            threads.append(threading.current_thread().name)

    cfg = ServeConfig(max_batch=8, max_queue=1000, linger_ms=0.0, workers=1)
    pool = WorkerPool(target, cfg, answer=answer, refitter=NoRefits(), record=lambda *a: None)
    await pool.start()
    state = RunState(LiveRun("pipe", target))
    t0 = time.perf_counter()
    batches = [spectra[i : i + 8] for i in range(0, len(spectra), 8)]
    for batch in batches:  # all queued at once: the batcher hands out batches of 8
        assert pool.enqueue(_jobs(state, batch, time.monotonic_ns())) == []
    while sum(len(a) for a in answered) < len(spectra):
        await asyncio.sleep(0.005)
        assert time.perf_counter() - t0 < 30, "not every spectrum was answered"
    elapsed = time.perf_counter() - t0
    assert "results" in threads  # under load the results thread answers
    # the model learnt the engine's time alone (scoring: 50 ms), the tail the answering after it (50 ms more, and
    # any wait for the results thread): a batch ahead of a newcomer costs it the first, its own batch both
    assert pool.model.predict(8) < 1.5 * STAGE_S, (pool.model.fixed_s, pool.model.per_item_s)
    assert pool.batcher.tail.predict(8) >= 0.8 * STAGE_S, (pool.batcher.tail.fixed_s, pool.batcher.tail.per_item_s)
    # a lone batch, nothing else to score: the engine thread answers it itself (no hand-over)
    threads.clear()
    lone = [s.__class__(**{**{f: getattr(s, f) for f in s.__dataclass_fields__}, "scan": 10**6}) for s in spectra[:1]]
    pool.enqueue(_jobs(state, lone, time.monotonic_ns()))
    while len(threads) < 1:
        await asyncio.sleep(0.005)
    assert threads == ["engine_0"]
    pool.close()
    assert await pool.join(10)
    # one after the other: 2 x 10 x STAGE_S = 1.0 s; overlapped: about 11 x STAGE_S = 0.55 s
    assert elapsed < 0.8 * 2 * len(batches) * STAGE_S, elapsed
    scans = [s for a in answered for s in a]
    assert sorted(scans) == sorted([*(s.scan for s in spectra), 10**6]) and len(set(scans)) == len(scans)
    assert not pool.alive() and pool.failed() == 0


@pytest.mark.asyncio
async def test_spectra_stuck_behind_a_long_batch_are_shed_before_their_budget_ends(demo_index):
    """The engine is busy for 0.6 s; spectra with a 200 ms budget queued behind it are answered ``shed`` by the
    expiry thread before the 200 ms are over, not when the engine comes back."""
    target = SlowTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")), 0.0)
    spectra = list(read_spectra(bundled(RUN)))[:6]
    got: list[tuple[str, str, float]] = []  # thread, status, ms after receipt

    def answer(answers) -> None:
        now = time.monotonic_ns()
        for _, results, stamps in answers:
            for st, received in zip(results.messages(), stamps.received_mono.tolist(), strict=True):
                got.append((threading.current_thread().name, st["status"], (now - received) / 1e6))

    cfg = ServeConfig(max_batch=8, max_queue=1000, linger_ms=0.0, workers=1)
    pool = WorkerPool(target, cfg, answer=answer, refitter=NoRefits(), record=lambda *a: None)
    await pool.start()
    target.stage_s = 0.6  # slower than the warm-up taught the model
    state = RunState(LiveRun("stuck", target))
    pool.enqueue(_jobs(state, spectra[:1], time.monotonic_ns()))  # taken at once: the engine is busy 0.6 s
    await asyncio.sleep(0.05)
    refused = pool.enqueue(_jobs(state, spectra[1:], time.monotonic_ns(), budget_ns=200 * 10**6))
    assert refused == []  # the model does not know yet how slow this engine is: admitted, then given up
    while len(got) < len(spectra):
        await asyncio.sleep(0.01)
    pool.close()
    assert await pool.join(10)
    stuck = [g for g in got if g[1] == "shed"]
    assert len(stuck) == 5 and {g[0] for g in stuck} == {"expiry"}
    assert all(ms < 200 for _, _, ms in stuck), stuck


@pytest.mark.asyncio
async def test_spectra_an_engine_thread_gives_up_are_answered_by_the_expiry_thread_even_at_a_close(demo_index):
    """An engine thread that finds late spectra on its way to a batch only takes them out of the queue; the expiry
    thread answers them ``shed`` (a lone engine thread keeps scoring under overload), each once, also when the pool
    closes at once after."""
    target = SlowTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")), 0.0)
    spectra = list(read_spectra(bundled(RUN)))[:6]
    got: list[tuple[str, str, int]] = []  # thread, status, scan
    ahead = [0]  # ns the pool's clock runs ahead of the monotonic one

    def answer(answers) -> None:
        for _, results, _ in answers:
            got.extend((threading.current_thread().name, st["status"], int(scan))
                       for st, scan in zip(results.messages(), results.scan, strict=True))  # fmt: skip

    cfg = ServeConfig(max_batch=8, max_queue=1000, linger_ms=0.0, workers=1)
    pool = WorkerPool(target, cfg, answer=answer, refitter=NoRefits(), record=lambda *a: None,
                      clock=lambda: time.monotonic_ns() + ahead[0])  # fmt: skip
    await pool.start()
    target.stage_s = 0.4
    state = RunState(LiveRun("given-up", target))
    pool.enqueue(_jobs(state, spectra[:1], pool.clock()))  # taken at once: the engine is busy 0.4 s
    await asyncio.sleep(0.05)
    assert pool.enqueue(_jobs(state, spectra[1:], pool.clock(), budget_ns=10**9)) == []
    with pool._cv:  # as an engine thread in `_take`: their budget over (the clock 10 s on), given up, not answered
        ahead[0] = 10 * 10**9
        assert pool._expire(here=False) and pool.waiting == 0 and not got
    pool.close()
    assert await pool.join(10)
    shed = [g for g in got if g[1] == "shed"]
    assert sorted(g[2] for g in shed) == sorted(s.scan for s in spectra[1:]) and {g[0] for g in shed} == {"expiry"}
    assert sorted(g[2] for g in got) == sorted(s.scan for s in spectra)  # each spectrum once


@pytest.mark.asyncio
async def test_a_model_taught_by_a_stalled_warm_up_does_not_shed_everything_for_good(demo_index):
    """A warm-up batch that stalled (seen on a busy machine) leaves a model predicting 1 s a batch, against a 100 ms
    budget: every spectrum would be given up before an engine took it, none scored, the model never corrected (a
    daemon that shed everything for as long as it ran: bench/RESULTS.md). An idle engine that scored nothing for
    `PROBE_AFTER_NS` scores what waits; the model forgets the stall and later spectra are scored in time."""
    target = SlowTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")), 0.0)
    spectra = list(read_spectra(bundled(RUN)))[:40]
    got: list[tuple[str, float]] = []  # status, ms after receipt

    def answer(answers) -> None:
        now = time.monotonic_ns()
        for _, results, stamps in answers:
            for st, received in zip(results.messages(), stamps.received_mono.tolist(), strict=True):
                got.append((st["status"], (now - received) / 1e6))

    cfg = ServeConfig(max_batch=8, max_queue=1000, linger_ms=0.0, workers=1)
    pool = WorkerPool(target, cfg, answer=answer, refitter=NoRefits(), record=lambda *a: None)
    await pool.start()
    pool.model.fixed_s, pool.model.per_item_s = 1.0, 0.0  # what the stalled warm-up taught it
    pool.model._w = pool.model._x = pool.model._y = pool.model._xx = pool.model._xy = 0.0
    for k, sp in enumerate(spectra):  # one every 20 ms, 100 ms budget each
        state = RunState(LiveRun(f"stalled{k}", target))
        pool.enqueue(_jobs(state, [sp], time.monotonic_ns(), budget_ns=100 * 10**6))
        await asyncio.sleep(0.02)
    while len(got) < len(spectra):
        await asyncio.sleep(0.01)
    pool.close()
    assert await pool.join(10)
    scored = [ms for status, ms in got if status != "shed"]
    assert len(scored) >= len(spectra) // 2, got  # before the probe: none
    assert pool.model.predict(1) < 0.5  # the stall forgotten
    assert all(ms < 100 for status, ms in got[-10:]), got[-10:]  # and the last ones all in time


def test_a_batch_far_faster_than_predicted_restarts_the_fit() -> None:
    from rtsearch.serve.batching import EngineTimeModel

    m = EngineTimeModel(fixed_s=0.01, per_item_s=2e-5)
    for n in (1, 7, 64, 512):  # a warm-up stalled by 1 s at every size
        m.observe(n, 1.0 + 1e-5 * n)
    assert m.predict(1) > 0.9
    m.observe(4, 0.002)  # one batch of 4 in 2 ms, under a third of the fixed cost: the fit restarts
    assert m.predict(4) == pytest.approx(0.002, abs=1e-12)
    m.observe(4, m.predict(4) * 0.5)  # half the fixed cost: fitted in, not restarted
    assert 0.001 < m.predict(4) < 0.002


def _statuses_pool(demo_index, n: int) -> tuple[WorkerPool, object, list, list[str]]:
    """A pool of one engine thread on the demo target (answering at once), ``n`` of the bundled run's spectra, and
    the list its answers' statuses go to (the pool not started)."""
    target = SlowTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")), 0.0)
    got: list[str] = []

    def answer(answers) -> None:
        for _, results, _ in answers:
            got.extend(st["status"] for st in results.messages())

    pool = WorkerPool(target, ServeConfig(max_batch=8, max_queue=1000, linger_ms=0.0, workers=1), answer=answer,
                      refitter=NoRefits(), record=lambda *a: None)  # fmt: skip
    return pool, target, list(read_spectra(bundled(RUN)))[:n], got


@pytest.mark.asyncio
async def test_nothing_is_given_up_while_nothing_is_in_flight(demo_index):
    """A model that predicts a batch of one beyond the budget (0.5 s a spectrum, 100 ms budgets) gave up every
    spectrum before an idle engine took it — until a probe 250 ms after the last batch — and learnt nothing
    meanwhile (a 50 Da window on NumPy: 16 of 400 scored, bench/RESULTS.md). With nothing in flight the engine takes
    what comes whatever the model says, and its first batch corrects the model: every spectrum is scored."""
    pool, target, spectra, got = _statuses_pool(demo_index, 8)
    await pool.start()
    pool.model.fixed_s, pool.model.per_item_s = 0.0, 0.5
    pool.model._w = pool.model._x = pool.model._y = pool.model._xx = pool.model._xy = 0.0
    with pool._cv:
        pool._scored_at = pool.clock()  # an engine scored a moment ago: no probe for `PROBE_AFTER_NS`
    state = RunState(LiveRun("idle", target))
    for sp in spectra:  # one every 20 ms, all within the probe's 250 ms: each alone, the engine idle when it comes
        assert pool.enqueue(_jobs(state, [sp], time.monotonic_ns(), budget_ns=100 * 10**6)) == []
        await asyncio.sleep(0.02)
    while len(got) < len(spectra):
        await asyncio.sleep(0.01)
    assert "shed" not in got, got
    assert pool.model.predict(1) < 0.1
    # one that reaches the idle pool past its headroom (received 99.5 ms ago; the margin alone is 1 ms) is given up
    pool.enqueue(_jobs(state, spectra[:1], time.monotonic_ns() - 99_500_000, budget_ns=100 * 10**6))
    while len(got) <= len(spectra):
        await asyncio.sleep(0.01)
    pool.close()
    assert await pool.join(10)
    assert got[len(spectra):] == ["shed"]


class ThreadsOfTarget(SlowTarget):
    """A `SlowTarget` that notes which engine thread scored each batch, and its size."""

    def __init__(self, target: DatabaseTarget, stage_s: float) -> None:
        super().__init__(target, stage_s)
        self.scored_by: list[tuple[str, int]] = []

    def score(self, spectra: SpectraBatch):
        self.scored_by.append((threading.current_thread().name, len(spectra)))
        return super().score(spectra)


@pytest.mark.asyncio
async def test_a_second_engine_thread_takes_only_large_batches(demo_index):
    """With two engine threads, lone spectra go to the first only (a second one splitting them into smaller batches
    raised p99 on the GPU machine); a queue of `OVERLAP_MIN` or more is shared."""
    from rtsearch.serve.workers import OVERLAP_MIN

    target = ThreadsOfTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")),
                             stage_s=0.02)  # fmt: skip
    spectra = list(read_spectra(bundled(RUN)))
    answered = [0]

    def answer(answers) -> None:
        answered[0] += sum(len(results) for _, results, _ in answers)

    cfg = ServeConfig(max_batch=512, max_queue=100_000, linger_ms=0.0, workers=2)
    pool = WorkerPool(target, cfg, answer=answer, refitter=NoRefits(), record=lambda *a: None)
    await pool.start()
    target.scored_by.clear()  # the warm-up's batches
    state = RunState(LiveRun("gate", target))
    for k in range(20):  # a stream of lone spectra
        assert pool.enqueue(_jobs(state, spectra[k : k + 1], time.monotonic_ns())) == []
        await asyncio.sleep(0.03)
    while answered[0] < 20:
        await asyncio.sleep(0.005)
    assert {name for name, _ in target.scored_by} == {"engine_0"}, target.scored_by
    target.scored_by.clear()
    many = (spectra * (OVERLAP_MIN * 3 // len(spectra) + 1))[: OVERLAP_MIN * 3]
    assert pool.enqueue(_jobs(state, many, time.monotonic_ns())) == []
    while answered[0] < 20 + len(many):
        await asyncio.sleep(0.01)
    names = {name for name, _ in target.scored_by}
    assert names == {"engine_0", "engine_1"}, target.scored_by
    assert sum(n for _, n in target.scored_by) == len(many)
    pool.close()
    assert await pool.join(10)


@pytest.mark.asyncio
async def test_an_engine_threads_wait_for_its_next_batch_is_counted_apart(demo_index):
    """The engine thread's seconds outside scoring are counted: waiting for a batch (``take``: idle here for
    0.3 s before the first spectrum comes) and gathering its spectra (``gather``)."""
    from rtsearch.serve.stats import Taken

    target = SlowTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")), 0.0)
    spectra = list(read_spectra(bundled(RUN)))[:4]
    taken: list[Taken] = []
    answered: list[int] = []
    cfg = ServeConfig(max_batch=8, max_queue=1000, linger_ms=0.0, workers=1)
    pool = WorkerPool(target, cfg, answer=lambda answers: answered.extend(len(r.scan) for _, r, _ in answers),
                      refitter=NoRefits(), record=lambda *stats: taken.extend(s for s in stats if isinstance(s, Taken)))
    await pool.start()
    taken.clear()  # the warm-up's
    await asyncio.sleep(0.3)
    pool.enqueue(_jobs(RunState(LiveRun("idle", target)), spectra, time.monotonic_ns()))
    while sum(answered) < len(spectra):
        await asyncio.sleep(0.005)
    pool.close()
    assert await pool.join(10)
    (first, *_) = taken
    assert first.size == len(spectra) and 0.25 < first.idle_s < 5.0 and 0.0 <= first.gather_s < 0.25, first


class CountingEvent(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


@pytest.mark.asyncio
async def test_a_lone_spectrum_at_an_idle_engine_leaves_the_expiry_thread_asleep(demo_index):
    """Each lone spectrum used to wake the expiry thread (~0.1 ms of Python holding the GIL beside the engine thread
    that took it at once: bench/RESULTS.md, 2026-11-27); an engine thread idle in its wait takes it, and gives up
    itself one already too late — which the expiry thread then answers ``shed``."""
    pool, target, spectra, got = _statuses_pool(demo_index, 6)
    pool._expiry_wake = wake = CountingEvent()
    await pool.start()
    state = RunState(LiveRun("lone", target))
    for sp in spectra:
        while pool.in_flight or pool.waiting or pool._takers == 0:  # the engine idle, waiting for the next
            await asyncio.sleep(0.005)
        assert pool.enqueue(_jobs(state, [sp], time.monotonic_ns(), budget_ns=10**9)) == []
    while len(got) < len(spectra):
        await asyncio.sleep(0.01)
    assert got.count("shed") == 0 and wake.sets == 0
    while pool._takers == 0:
        await asyncio.sleep(0.005)
    pool.enqueue(_jobs(state, spectra[:1], time.monotonic_ns() - 999_500_000, budget_ns=10**9))  # late on arrival
    while len(got) <= len(spectra):
        await asyncio.sleep(0.01)
    assert got[-1] == "shed" and wake.sets >= 1  # given up by the engine thread, answered by the expiry thread
    pool.close()
    assert await pool.join(10)


def test_an_engine_thread_gives_up_what_its_batch_behind_a_busy_worker_would_answer_late(demo_index):
    # `RTSEARCH_GIVE_UP_BEHIND`'s step, called as an engine thread calls it (under the condition): engine 10 ms a
    # batch, answering 5 ms after; two spectra wait, due 40 and 60 ms after now
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    pool = WorkerPool(target, ServeConfig(max_batch=8, max_queue=100), answer=lambda a: None, refitter=NoRefits(),
                      record=lambda *a: None)  # fmt: skip
    pool.model.fixed_s, pool.model.per_item_s, pool.batcher.tail.fixed_s = 0.010, 0.0, 0.005
    spectra = list(read_spectra(bundled(RUN)))[:2]
    now = time.monotonic_ns()
    state = RunState(LiveRun("behind", target))
    for s, budget_ms in zip(spectra, (40, 60), strict=True):
        assert pool.enqueue(_jobs(state, [s], now, budget_ns=budget_ms * 10**6)) == []
    with pool._cv:
        assert not pool._give_up_behind(now + 30 * 10**6)  # idle: the model is not asked
        pool._busy[1] = now + 30 * 10**6  # a batch in flight until 30 ms
        # a batch of both starting at 30 ms is answered at 30 + 10 + 5 (+ 1 margin) = 46: the first (due 40) goes
        assert pool._give_up_behind(now + 30 * 10**6)
        assert [len(c.jobs()) for c in pool._given_up] == [1] and len(pool.batcher) == 1
        assert not pool._give_up_behind(now + 30 * 10**6)  # the other, due 60, is in time alone


class RecordingTarget(SlowTarget):
    """The demo target, keeping each batch it is given."""

    def __init__(self, target: DatabaseTarget) -> None:
        super().__init__(target, 0.0)
        self.batches: list[SpectraBatch] = []

    def score(self, spectra: SpectraBatch):
        self.batches.append(spectra)
        return super().score(spectra)


@pytest.mark.asyncio
async def test_a_batch_reaches_the_engine_in_arrival_order_a_whole_chunk_uncopied(demo_index):
    """The batcher picks spectra by precursor mass; the engine gets them in the order they came: a chunk taken whole
    is handed on as it is (its peaks not copied), chunks taken together follow one another (bulk replays paid a
    gather a peak for the mass order: bench/RESULTS.md 2026-11-29)."""
    target = RecordingTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")))
    spectra = [sp for sp in read_spectra(bundled(RUN)) if sp.charges][:40]
    assert not np.all(np.diff([sp.precursor_mz for sp in spectra]) >= 0)  # the run's order is not the mass order
    cfg = ServeConfig(max_batch=64, max_queue=1000, linger_ms=0.0, workers=1)
    pool = WorkerPool(target, cfg, answer=lambda answers: None, refitter=NoRefits(), record=lambda *a: None)
    state = RunState(LiveRun("pipe", target))
    first = _jobs(state, spectra, time.monotonic_ns())
    second, third = _jobs(state, spectra[:25], time.monotonic_ns()), _jobs(state, spectra[25:], time.monotonic_ns())
    assert pool.enqueue(first) == []  # before the engine thread starts: one batch of this chunk alone
    await pool.start()
    while not target.batches:
        await asyncio.sleep(0.005)
    pool.close()
    assert await pool.join(10)
    got = target.batches[-1]
    assert got.scan.tolist() == [sp.scan for sp in spectra]
    assert np.shares_memory(got.mz, first.spectra.mz)  # handed on whole
    target.batches.clear()
    pool2 = WorkerPool(target, cfg, answer=lambda answers: None, refitter=NoRefits(), record=lambda *a: None)
    assert pool2.enqueue(third) == [] and pool2.enqueue(second) == []  # two chunks wait: one batch of both
    await pool2.start()
    while not target.batches:
        await asyncio.sleep(0.005)
    pool2.close()
    assert await pool2.join(10)
    assert target.batches[-1].scan.tolist() == [sp.scan for sp in spectra[25:] + spectra[:25]]
