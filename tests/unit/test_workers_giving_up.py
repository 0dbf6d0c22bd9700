"""Spectra given up on time by the engine threads and answered ``shed`` by the expiry thread
(`rtsearch.serve.engine.workers`, `expiry`): behind a long batch, at a close, behind a busy worker, never while
nothing is in flight; a model taught by a stalled warm-up recovers; a lone spectrum leaves the expiry thread asleep."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import ServeConfig, load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import LiveRun
from rtsearch.serve.engine.jobs import RunState
from rtsearch.serve.engine.workers import WorkerPool
from tests.unit.pool_parts import NoRefits, SlowTarget, queued, statuses_pool


@pytest.mark.asyncio
async def test_spectra_stuck_behind_a_long_batch_are_shed_before_their_budget_ends(demo_index):
    """The engine is busy for 4 s; spectra with a 1.5 s budget queued behind it are answered ``shed`` by the
    expiry thread as their budget ends (it keeps 25 ms of it to answer in), not when the engine comes back: long
    before the 4 s, on a busy machine too (how close to the budget is bench's to measure)."""
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
    target.stage_s = 4.0  # slower than the warm-up taught the model
    state = RunState(LiveRun("stuck", target))
    pool.enqueue(queued(state, spectra[:1], time.monotonic_ns()))  # taken at once: the engine is busy 4 s
    await asyncio.sleep(0.05)
    refused = pool.enqueue(queued(state, spectra[1:], time.monotonic_ns(), budget_ns=1500 * 10**6))
    assert refused == []  # the model does not know yet how slow this engine is: admitted, then given up
    while len(got) < len(spectra):
        await asyncio.sleep(0.01)
    pool.close()
    assert await pool.join(10)
    stuck = [g for g in got if g[1] == "shed"]
    assert len(stuck) == 5 and {g[0] for g in stuck} == {"expiry"}
    assert all(ms < 3000 for _, _, ms in stuck), stuck


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
    pool.enqueue(queued(state, spectra[:1], pool.clock()))  # taken at once: the engine is busy 0.4 s
    await asyncio.sleep(0.05)
    assert pool.enqueue(queued(state, spectra[1:], pool.clock(), budget_ns=10**9)) == []
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
    daemon that shed everything for as long as it ran: docs/history/RESULTS.md). An idle engine that scored nothing for
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
        for _ in pool.enqueue(queued(state, [sp], time.monotonic_ns(), budget_ns=100 * 10**6)):  # refused: the
            got.append(("shed", 0.0))  # daemon answers it ``shed`` (behind a busy engine, on a busy machine)
        await asyncio.sleep(0.02)
    while len(got) < len(spectra):
        await asyncio.sleep(0.01)
    pool.close()
    assert await pool.join(10)
    scored = [ms for status, ms in got if status != "shed"]
    assert len(scored) >= len(spectra) // 2, got  # before the probe: none
    assert pool.model.predict(1) < 0.5  # the stall forgotten
    assert any(status != "shed" for status, _ in got[-10:]), got[-10:]  # and scoring goes on to the end


def test_a_batch_far_faster_than_predicted_restarts_the_fit() -> None:
    from rtsearch.serve.engine.batching import EngineTimeModel

    m = EngineTimeModel(fixed_s=0.01, per_item_s=2e-5)
    for n in (1, 7, 64, 512):  # a warm-up stalled by 1 s at every size
        m.observe(n, 1.0 + 1e-5 * n)
    assert m.predict(1) > 0.9
    m.observe(4, 0.002)  # one batch of 4 in 2 ms, under a third of the fixed cost: the fit restarts
    assert m.predict(4) == pytest.approx(0.002, abs=1e-12)
    m.observe(4, m.predict(4) * 0.5)  # half the fixed cost: fitted in, not restarted
    assert 0.001 < m.predict(4) < 0.002


@pytest.mark.asyncio
async def test_nothing_is_given_up_while_nothing_is_in_flight(demo_index):
    """A model that predicts a batch of one beyond the budget (0.5 s a spectrum, 100 ms budgets) gave up every
    spectrum before an idle engine took it — until a probe 250 ms after the last batch — and learnt nothing
    meanwhile (a 50 Da window on NumPy: 16 of 400 scored, docs/history/RESULTS.md). With nothing in flight the engine
    takes what comes whatever the model says, and its first batch corrects the model: every spectrum is scored."""
    pool, target, spectra, got = statuses_pool(demo_index, 8)
    await pool.start()
    pool.model.fixed_s, pool.model.per_item_s = 0.0, 0.5
    pool.model._w = pool.model._x = pool.model._y = pool.model._xx = pool.model._xy = 0.0
    with pool._cv:
        pool._scored_at = pool.clock()  # an engine scored a moment ago: no probe for `PROBE_AFTER_NS`
    state = RunState(LiveRun("idle", target))
    for k, sp in enumerate(spectra):  # each alone, once the one before was answered: the engine idle when it comes
        while len(got) < k:  # (on a busy machine a NumPy batch of one can take longer than a 20 ms gap)
            await asyncio.sleep(0.005)
        assert pool.enqueue(queued(state, [sp], time.monotonic_ns(), budget_ns=100 * 10**6)) == []
    while len(got) < len(spectra):
        await asyncio.sleep(0.01)
    assert "shed" not in got, got
    assert pool.model.predict(1) < 0.1
    # one that reaches the idle pool past its headroom (received 99.5 ms ago; the margin alone is 1 ms) is given up
    pool.enqueue(queued(state, spectra[:1], time.monotonic_ns() - 99_500_000, budget_ns=100 * 10**6))
    while len(got) <= len(spectra):
        await asyncio.sleep(0.01)
    pool.close()
    assert await pool.join(10)
    assert got[len(spectra):] == ["shed"]


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
    that took it at once: docs/history/RESULTS.md, 2026-11-27); an engine thread idle in its wait takes it, and gives up
    itself one already too late — which the expiry thread then answers ``shed``."""
    pool, target, spectra, got = statuses_pool(demo_index, 6)
    pool._expiry_wake = wake = CountingEvent()
    await pool.start()
    state = RunState(LiveRun("lone", target))
    for sp in spectra:
        while pool.in_flight or pool.waiting or pool._takers == 0:  # the engine idle, waiting for the next
            await asyncio.sleep(0.005)
        assert pool.enqueue(queued(state, [sp], time.monotonic_ns(), budget_ns=10**9)) == []
    while len(got) < len(spectra):
        await asyncio.sleep(0.01)
    assert got.count("shed") == 0 and wake.sets == 0
    while pool._takers == 0:
        await asyncio.sleep(0.005)
    pool.enqueue(queued(state, spectra[:1], time.monotonic_ns() - 999_500_000, budget_ns=10**9))  # late on arrival
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
        assert pool.enqueue(queued(state, [s], now, budget_ns=budget_ms * 10**6)) == []
    with pool._cv:
        assert not pool._give_up_behind(now + 30 * 10**6)  # idle: the model is not asked
        pool._busy[1] = now + 30 * 10**6  # a batch in flight until 30 ms
        # a batch of both starting at 30 ms is answered at 30 + 10 + 5 (+ 1 margin) = 46: the first (due 40) goes
        assert pool._give_up_behind(now + 30 * 10**6)
        assert [len(c.jobs()) for c in pool._given_up] == [1] and len(pool.batcher) == 1
        assert not pool._give_up_behind(now + 30 * 10**6)  # the other, due 60, is in time alone
