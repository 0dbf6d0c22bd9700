"""Scoring in an engine process of its own (`rtsearch.serve.executors.engine_process`): the same answers as in a thread,
failures answered, a lost process noticed — on the bundled E. coli target and its real run, NumPy backend."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.errors import EngineError
from rtsearch.search.live import named
from rtsearch.serve.executors.engine_process import EngineGone, EngineProcess, _reply, open_scorer
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, replay
from tests.streaming import running, serve_config


def _ms2(run):
    return [s for s in run if s.ms_level == 2]


def _same(there, here) -> None:
    assert there.run == here.run and there.reason == here.reason and there.native_id == here.native_id
    for column in ("scan", "precursor_mz", "rt"):
        np.testing.assert_array_equal(getattr(there, column), getattr(here, column))
    for field in ("match", "charge", "calc_mz", "ppm_error", "matched_peaks", "features"):
        np.testing.assert_array_equal(getattr(there.best, field), getattr(here.best, field))


def test_a_batch_scored_in_the_engine_process_equals_the_same_batch_scored_here(engine, ecoli_run):
    spectra = _ms2(ecoli_run)
    batch = SpectraBatch.of(spectra)
    here = engine.score(batch)
    with EngineProcess(engine.reopen("numpy"), "engine_test") as remote:
        there = remote.score(batch)
        _same(there, here)
        assert (here.best.match >= 0).sum() > 100  # real matches, not an empty batch compared with itself
        assert there.names is not None and there.names.peptides[:20] == named(engine, here).names.peptides[:20]
        for s in spectra[:20]:  # lone spectra: the engine's scalar path, the reply without the spectra's columns
            lone = SpectraBatch.of([s])
            _same(remote.score(lone), engine.score(lone))


def test_the_reply_leaves_out_only_the_columns_the_daemon_holds(engine, ecoli_run):
    batch = SpectraBatch.of(_ms2(ecoli_run)[:5])
    scored = engine.score(batch)
    kind, payload = _reply(batch, scored)
    assert kind == "matches" and payload[0] is scored.best
    # a target whose batch is not the spectra's own columns (a copy, another order) sends it whole
    copied = dataclasses.replace(scored, scan=scored.scan.copy())
    assert _reply(batch, copied) == ("scored", copied)


def test_a_failing_batch_is_an_engine_error_and_the_process_goes_on(engine, ecoli_run):
    good = SpectraBatch.of(_ms2(ecoli_run)[:5])
    bad = dataclasses.replace(good, offsets=good.offsets * 1000)  # peaks that are not there
    with EngineProcess(engine.reopen("numpy"), "engine_test") as remote:
        with pytest.raises(EngineError) as err:
            remote.score(bad)
        assert "Error" in str(err.value)  # the child's exception, by name
        assert len(remote.score(good)) == 5


def test_a_killed_engine_process_is_noticed_not_waited_for(engine, ecoli_run):
    remote = EngineProcess(engine.reopen("numpy"), "engine_test").start()
    try:
        remote.child.proc.kill()
        remote.child.proc.join(5)
        with pytest.raises(EngineGone, match="gone"):
            remote.score(SpectraBatch.of(_ms2(ecoli_run)[:3]))
    finally:
        remote.close()


def test_thread_is_the_default_on_numpy_and_process_when_asked(engine):
    score, proc = open_scorer(engine, "auto", "engine_test")
    assert proc is None and score == engine.score
    score, proc = open_scorer(engine, "process", "engine_test")
    try:
        assert proc is not None and proc.alive() and score == proc.score
    finally:
        assert proc is not None
        proc.close()
    assert not proc.alive()


def _send_and_collect(spectra_ep: str, results_ep: str, runs) -> tuple[Sent, Collector]:
    col = Collector(results_ep).start()
    sent = Sent()
    try:
        with Sender(spectra_ep, mode="push", wait_s=20) as sender:
            replay(sender, runs, speed=None, rate=2000.0, sent=sent)
        col.wait(len(sent.ms2), idle_s=20, timeout_s=120)
    finally:
        col.stop()
    return sent, col


@pytest.mark.asyncio
async def test_the_daemon_answers_the_same_with_its_engine_in_a_process(engine, ecoli_run, tmp_path):
    answers = {}
    for host in ("thread", "process"):
        cfg = serve_config(tmp_path / host, engine=host)
        async with running(engine, cfg) as daemon:
            sent, col = await asyncio.to_thread(
                _send_and_collect, daemon.endpoints.spectra, daemon.endpoints.results, [("ecoli", ecoli_run)])
            report = col.report(sent.ms2)
        assert report.sent == 139 and report.lost == 0 and report.duplicates == 0
        # the best match is the engine's; identified or not follows running q-values, which depend on what was
        # answered before (the batches' timing), so the statuses are compared as scored or not
        answers[host] = {r["scan"]: (r["status"] in ("identified", "unidentified"), r.get("peptide"))
                         for r in col.results()}  # fmt: skip
        # live: none before the run holds 50 scored (`rtsearch.search.live.LIVE_FROM`): 18-42 of this run seen
        assert sum(r["status"] == "identified" for r in col.results()) > 10
    assert answers["process"] == answers["thread"]
    assert sum(p is not None for _, p in answers["process"].values()) > 100


def test_the_gil_switch_interval_follows_where_the_engine_scores(engine, monkeypatch):
    from rtsearch.serve.children.runtime import gil_switch_s
    from rtsearch.serve.executors.engine_process import scores_in_process

    monkeypatch.delenv("RTSEARCH_GIL_SWITCH_S", raising=False)
    assert not scores_in_process(engine, "auto") and not scores_in_process(engine, "thread")  # NumPy: a thread
    assert scores_in_process(engine, "process")
    assert gil_switch_s(engine_in_process=False) == 0.0001 and gil_switch_s(engine_in_process=True) == 0.001
    monkeypatch.setenv("RTSEARCH_GIL_SWITCH_S", "0.002")
    assert gil_switch_s(engine_in_process=False) == gil_switch_s(engine_in_process=True) == 0.002
    monkeypatch.setenv("RTSEARCH_GIL_SWITCH_S", "fast")  # not a number: the defaults, with a warning
    assert gil_switch_s(engine_in_process=True) == 0.001
