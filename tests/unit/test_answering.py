"""The results thread (`rtsearch.serve.engine.answering`): batches that queued behind the one it takes are answered with
it, one call a run, each answer beside its own spectrum's stamps; every spectrum answered once."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import LiveRun
from rtsearch.serve.engine.answering import Answering
from rtsearch.serve.engine.jobs import Jobs, RunState, Stamps
from rtsearch.serve.outputs.publish import scored_answers


@pytest.fixture(scope="module")
def target(demo_index):
    return DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))


def _jobs(spectra, first: int, n: int, states: list[RunState]) -> Jobs:
    """``n`` spectra from ``first``, alternately of each run; each one's sent stamp is its scan × 10."""
    batch = SpectraBatch.of(spectra[first : first + n])
    sent = np.asarray(batch.scan, np.int64) * 10
    other = np.zeros(n, np.int64)
    stamps = Stamps(sent, other, other, np.full(n, 10**9, np.int64), np.zeros(n, bool))
    return Jobs(batch, stamps, (np.arange(n) % len(states)).astype(np.int32), states)


def _states(target, runs: int) -> list[RunState]:
    return [RunState(LiveRun(f"r{k}", target, refits="deferred", q_refresh=0.01)) for k in range(runs)]


def test_batches_answered_together_give_each_run_one_answer_in_order_beside_its_own_stamps(target):
    spectra = list(read_spectra(bundled(RUN)))
    states = _states(target, 2)
    first, second = _jobs(spectra, 0, 9, states), _jobs(spectra, 9, 12, states)
    answers = scored_answers([(j, target.score(j.spectra)) for j in (first, second)])
    assert [state for state, _, _ in answers] == states  # one answer a run
    alone = _states(target, 2)  # the same batches answered one at a time: the same matches
    one_by_one = [scored_answers([(j, target.score(j.spectra))]) for j in (_jobs(spectra, 0, 9, alone),
                                                                           _jobs(spectra, 9, 12, alone))]  # fmt: skip
    for k, (_, results, stamps) in enumerate(answers):
        rows = [np.flatnonzero(j.run == k) for j in (first, second)]
        scans = np.concatenate([j.spectra.scan[r] for j, r in zip((first, second), rows, strict=True)])
        assert results.scan.tolist() == scans.tolist()  # the run's spectra, the first batch's first
        assert stamps.sent_ns.tolist() == (scans * 10).tolist()  # each beside its own stamps
        apart = [answer[k][1] for answer in one_by_one]
        assert results.peptide == [p for r in apart for p in r.peptide]
    assert sum(len(r) for _, r, _ in answers) == 21
    assert sum(state.live.answered for state in states) == 21


def test_the_results_thread_takes_what_queued_behind_its_batch_with_it(target):
    spectra = list(read_spectra(bundled(RUN)))
    states = _states(target, 4)
    calls: list[int] = []
    observed: list[int] = []
    no_refits = type("NoRefits", (), {"refit": lambda self, states: None})()
    thread = Answering(answer=lambda answers: calls.append(sum(len(r) for _, r, _ in answers)), refitter=no_refits,
                       record=lambda *a: None, idle=lambda: True,
                       observe=lambda items, t0, t1: observed.extend(len(j) for j, *_ in items))  # fmt: skip
    batches = [_jobs(spectra, 10 * k, 10, states) for k in range(3)]
    items = [(j, target.score(j.spectra), time.perf_counter(), time.perf_counter()) for j in batches]
    thread._lock.acquire()  # the thread busy with an earlier batch: these three queue (two) or wait to (one)
    thread.thread.start()
    handing = threading.Thread(target=lambda: [thread.hand(item) for item in items])
    handing.start()
    deadline = time.monotonic() + 5
    while thread._queue.qsize() < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not thread.try_here(items[0])  # busy: the engine thread hands it over instead
    thread._lock.release()
    handing.join(5)
    thread.stop()
    thread.thread.join(5)
    assert not thread.thread.is_alive()
    assert sum(calls) == 30 and observed == [10, 10, 10]  # every spectrum answered once, each batch observed
    assert len(calls) < 3  # those that queued went together
