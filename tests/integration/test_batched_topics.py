"""The batched topics through the daemon: a run sent as ``spectra`` messages is answered in ``batch.results``
messages, exactly once a spectrum, with the very matches the same run sent one message a spectrum gets; bad
rows are answered ``invalid`` in the batch; overload is answered at the door in batches too."""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest
import zmq

from rtsearch.protocol.batch import encode_spectra
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, replay
from tests.streaming import running, scrape, serve_config

pytestmark = pytest.mark.asyncio


def _replay(spectra_ep: str, results_ep: str, runs, *, rate: float, batch: int) -> tuple[Sent, Collector]:
    col = Collector(results_ep).start()
    sent = Sent()
    try:
        with Sender(spectra_ep, mode="push", wait_s=20) as sender:
            replay(sender, runs, speed=None, rate=rate, sent=sent, batch=batch)
        col.wait(len(sent.ms2), idle_s=20, timeout_s=120)
    finally:
        col.stop()
    return sent, col


@pytest.mark.parametrize("intakes", [1, 2])
async def test_a_run_sent_in_batches_gets_the_matches_it_gets_one_by_one(intakes, engine, ecoli_run, tmp_path):
    cfg = serve_config(tmp_path, intakes=intakes)
    async with running(engine, cfg) as daemon:
        ep = (daemon.endpoints.spectra, daemon.endpoints.results)
        one, col_one = await asyncio.to_thread(_replay, *ep, [("each", ecoli_run)], rate=2000.0, batch=1)
        bulk, col_bulk = await asyncio.to_thread(_replay, *ep, [("bulk", ecoli_run)], rate=math.inf, batch=40)
        for _ in range(200):
            if len(daemon.finished) == 2:
                break
            await asyncio.sleep(0.05)
        metrics = scrape(daemon.endpoints.metrics_port)
    n_ms2 = sum(1 for s in ecoli_run if s.ms_level == 2)
    report = col_bulk.report(bulk.ms2)
    assert report.sent == n_ms2 and report.lost == 0 and report.duplicates == 0
    # every answer to the batched run came in batch.results messages, none in result messages
    assert col_bulk.batches and not [b for b, _ in col_bulk.raw if json.loads(b)["run"] == "bulk"]
    assert {r["run"] for b, _ in col_bulk.batches for r in json.loads(b)} == {"bulk"}
    assert not [b for b, _ in col_one.batches]
    assert sum(len(json.loads(b)) for b, _ in col_bulk.batches) == n_ms2 == col_bulk.count()
    by_scan = {r["scan"]: r for r in col_one.results() if r["run"] == "each"}
    for r in col_bulk.results():
        if r["run"] != "bulk":
            continue
        same = by_scan[r["scan"]]
        assert (r["status"] in ("identified", "unidentified")) == (same["status"] in ("identified", "unidentified"))
        assert r.get("peptide") == same.get("peptide") and r.get("score") == pytest.approx(same.get("score"))
        assert r["sent_ns"] <= r["received_ns"] <= r["published_ns"]
    assert metrics['rtsearch_spectra_received_total{ms_level="2"}'] == 2 * n_ms2
    assert metrics['rtsearch_spectra_received_total{ms_level="1"}'] == 2 * sum(s.ms_level == 1 for s in ecoli_run)
    files = {d.summary.run: d for d in daemon.finished}
    assert files["bulk"].summary.spectra == files["each"].summary.spectra == n_ms2


async def test_bad_rows_of_a_batch_are_answered_in_the_batch(engine, ecoli_run, tmp_path):
    ms2 = [s for s in ecoli_run if s.ms_level == 2][:5]
    frames = encode_spectra("rows", ms2, sent_ns=1, answer="batch")
    prec = np.frombuffer(frames[5], "<f8").copy()
    prec[1] = 0.0  # an MS2 spectrum without a precursor
    frames[5] = prec.tobytes()
    async with running(engine, serve_config(tmp_path)) as daemon:
        col = await asyncio.to_thread(Collector(daemon.endpoints.results).start)
        push = zmq.Context.instance().socket(zmq.PUSH)
        push.connect(daemon.endpoints.spectra)
        push.send_multipart(frames)
        push.send_multipart(frames[:-1])  # broken: counted, not answered (no scan can be trusted)
        await asyncio.to_thread(col.wait, 5, idle_s=10, timeout_s=60)
        col.stop()
        push.close()
        metrics = scrape(daemon.endpoints.metrics_port)
    got = {r["scan"]: r for r in col.results()}
    assert not col.raw and sorted(got) == sorted(s.scan for s in ms2)
    assert got[ms2[1].scan]["status"] == "invalid" and "precursor_mz" in got[ms2[1].scan]["reason"]
    assert all(got[s.scan]["status"] in ("identified", "unidentified") for s in ms2 if s is not ms2[1])
    assert metrics['rtsearch_invalid_total{reason="field"}'] == 1
    assert metrics['rtsearch_invalid_total{reason="frames"}'] == 1


async def test_overload_in_batches_is_answered_at_the_door_in_batches(engine, ecoli_run, tmp_path):
    """Six runs of batches of 20 at 2,500 spectra/s with a 50 ms budget, beyond the NumPy engine: every
    spectrum answered once, in batch.results messages, those shed at the door at once."""
    cfg = serve_config(tmp_path, budget_ms=50.0, intakes=2)
    ms2 = [s for s in ecoli_run if s.ms_level == 2]
    runs = [(f"door{k}", ms2) for k in range(6)]
    async with running(engine, cfg) as daemon:
        sent, col = await asyncio.to_thread(_replay, daemon.endpoints.spectra, daemon.endpoints.results, runs,
                                            rate=2_500.0, batch=20)  # fmt: skip
        metrics = scrape(daemon.endpoints.metrics_port)
    report = col.report(sent.ms2)
    assert report.sent == 6 * len(ms2) and report.lost == 0 and report.duplicates == 0 and not col.raw
    door = [r for r in col.results() if r["status"] == "shed" and "answered at the door" in r["reason"]]
    assert door and metrics['rtsearch_shed_total{reason="door"}'] == len(door)
    def ms(rows):
        return np.array([(r["published_ns"] - r["received_ns"]) / 1e6 for r in rows])

    scored = ms([r for r in col.results() if r["status"] != "shed"])
    # at once: not after the engine (12.8 ms median at the door, 49 ms scored, on a quiet 2-core machine), and
    # none held anywhere near a second
    assert np.median(ms(door)) < np.median(scored) and ms(door).max() < 1_000.0, (ms(door), scored)
