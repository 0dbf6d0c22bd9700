"""The engine threads and the results thread (`rtsearch.serve.engine.workers`): under load the engine scores the next
batch while the results thread answers the last, so a batch costs the slower of the two stages, not their sum; a
lone batch is answered by the engine thread itself; every spectrum once; a second engine thread takes only large
batches; a batch reaches the engine in arrival order. Giving up on time: test_workers_giving_up.py."""

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
from rtsearch.serve.engine.jobs import RunState
from rtsearch.serve.engine.workers import WorkerPool
from tests.unit.pool_parts import STAGE_S, NoRefits, SlowTarget, queued


@pytest.mark.asyncio
async def test_the_engine_scores_while_the_results_thread_answers(demo_index):
    spans: dict[str, list[tuple[float, float]]] = {"scoring": [], "answering": []}  # (start, end), perf_counter s

    class Timed(SlowTarget):
        def score(self, spectra):
            t0 = time.perf_counter()
            out = super().score(spectra)
            spans["scoring"].append((t0, time.perf_counter()))
            return out

    target = Timed(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")))
    spectra = list(read_spectra(bundled(RUN)))[:80]
    answered: list[tuple[int, ...]] = []
    threads: list[str] = []
    lock = threading.Lock()

    def answer(answers) -> None:
        t0 = time.perf_counter()
        time.sleep(STAGE_S)  # publishing as slow as scoring
        with lock:
            answered.extend(tuple(int(s) for s in results.scan) for _, results, _ in answers)
            threads.append(threading.current_thread().name)
            if threading.current_thread().name == "results":
                spans["answering"].append((t0, time.perf_counter()))

    cfg = ServeConfig(max_batch=8, max_queue=1000, linger_ms=0.0, workers=1)
    pool = WorkerPool(target, cfg, answer=answer, refitter=NoRefits(), record=lambda *a: None)
    await pool.start()
    try:
        state = RunState(LiveRun("pipe", target))
        t0 = time.perf_counter()
        batches = [spectra[i : i + 8] for i in range(0, len(spectra), 8)]
        for batch in batches:  # all queued at once: the batcher hands out batches of 8
            assert pool.enqueue(queued(state, batch, time.monotonic_ns())) == []
        while sum(len(a) for a in answered) < len(spectra):
            await asyncio.sleep(0.005)
            assert time.perf_counter() - t0 < 120, "not every spectrum was answered"  # a hang, not a speed
        assert "results" in threads  # under load the results thread answers
        # ... while the engine scores the next batch (a batch costs the slower stage, not both): their spans overlap
        overlaps = sum(a0 < s1 and s0 < a1 for a0, a1 in spans["answering"] for s0, s1 in spans["scoring"])
        assert overlaps >= len(spans["answering"]) // 2, spans
        # the model learnt the engine's time alone (scoring: 50 ms), the tail the answering after it (50 ms more, and
        # any wait for the results thread): a batch ahead of a newcomer costs it the first, its own batch both
        # (against the scoring as measured here, which a busy machine lengthens, not against its 50 ms alone)
        scoring = sorted(b - a for a, b in spans["scoring"])[len(spans["scoring"]) // 2]
        assert pool.model.predict(8) < scoring + 0.5 * STAGE_S, (scoring, pool.model.fixed_s, pool.model.per_item_s)
        assert pool.batcher.tail.predict(8) >= 0.8 * STAGE_S, (pool.batcher.tail.fixed_s, pool.batcher.tail.per_item_s)
        # a lone batch, nothing else to score: the engine thread answers it itself (no hand-over)
        threads.clear()
        lone = [s.__class__(**{**{f: getattr(s, f) for f in s.__dataclass_fields__}, "scan": 10**6})
                for s in spectra[:1]]  # fmt: skip
        pool.enqueue(queued(state, lone, time.monotonic_ns()))
        while len(threads) < 1:
            await asyncio.sleep(0.005)
        assert threads == ["engine_0"]
    finally:  # stopped whatever failed: no thread left behind
        pool.close()
    assert await pool.join(10)
    scans = [s for a in answered for s in a]
    assert sorted(scans) == sorted([*(s.scan for s in spectra), 10**6]) and len(set(scans)) == len(scans)
    assert not pool.alive() and pool.failed() == 0


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
    from rtsearch.serve.engine.workers import OVERLAP_MIN

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
        assert pool.enqueue(queued(state, spectra[k : k + 1], time.monotonic_ns())) == []
        await asyncio.sleep(0.03)
    while answered[0] < 20:
        await asyncio.sleep(0.005)
    assert {name for name, _ in target.scored_by} == {"engine_0"}, target.scored_by
    target.scored_by.clear()
    many = (spectra * (OVERLAP_MIN * 3 // len(spectra) + 1))[: OVERLAP_MIN * 3]
    assert pool.enqueue(queued(state, many, time.monotonic_ns())) == []
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
    from rtsearch.serve.observe.stats import Taken

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
    pool.enqueue(queued(RunState(LiveRun("idle", target)), spectra, time.monotonic_ns()))
    while sum(answered) < len(spectra):
        await asyncio.sleep(0.005)
    pool.close()
    assert await pool.join(10)
    (first, *_) = taken
    # the 0.3 s waited for the spectra is idle time, not gathering (which is the batch's own few spectra)
    assert first.size == len(spectra) and 0.25 < first.idle_s < 5.0 and 0.0 <= first.gather_s < first.idle_s, first


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
    gather a peak for the mass order: docs/history/RESULTS.md 2026-11-29)."""
    target = RecordingTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")))
    spectra = [sp for sp in read_spectra(bundled(RUN)) if sp.charges][:40]
    assert not np.all(np.diff([sp.precursor_mz for sp in spectra]) >= 0)  # the run's order is not the mass order
    cfg = ServeConfig(max_batch=64, max_queue=1000, linger_ms=0.0, workers=1)
    pool = WorkerPool(target, cfg, answer=lambda answers: None, refitter=NoRefits(), record=lambda *a: None)
    state = RunState(LiveRun("pipe", target))
    first = queued(state, spectra, time.monotonic_ns())
    second, third = queued(state, spectra[:25], time.monotonic_ns()), queued(state, spectra[25:], time.monotonic_ns())
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
