"""The daemon over real ZeroMQ sockets on free loopback ports, fed by the simulator, read by the collector."""

from __future__ import annotations

import asyncio
import csv
import json

import pytest
import zmq

from rtsearch.protocol import wire
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, replay
from tests.streaming import free_port, running, scrape, serve_config

pytestmark = pytest.mark.asyncio


def _send_and_collect(
    spectra_ep: str, results_ep: str, mode: str, runs, *, rate: float = 2000.0
) -> tuple[Sent, Collector]:
    col = Collector(results_ep).start()
    sent = Sent()
    try:
        with Sender(spectra_ep, mode=mode, wait_s=20) as sender:  # type: ignore[arg-type]
            replay(sender, runs, speed=None, rate=rate, sent=sent)
        col.wait(len(sent.ms2), idle_s=20, timeout_s=120)
    finally:
        col.stop()
    return sent, col


@pytest.mark.parametrize(("mode", "intakes"), [("pull", 1), ("sub", 1), ("pull", 3), ("sub", 3)])
async def test_every_ms2_spectrum_is_answered_once(mode, intakes, engine, ecoli_run, tmp_path, caplog):
    """Also behind the door (3 intake processes): one answer each, one results file holding every spectrum."""
    if mode == "sub":
        port = free_port()
        cfg = serve_config(tmp_path, spectra=f"tcp://127.0.0.1:{port}", spectra_mode="sub", intakes=intakes)
    else:
        cfg = serve_config(tmp_path, intakes=intakes)
    async with running(engine, cfg) as daemon:
        sim_ep = cfg.spectra if mode == "sub" else daemon.endpoints.spectra
        sent, col = await asyncio.to_thread(
            _send_and_collect, sim_ep, daemon.endpoints.results, "pub" if mode == "sub" else "push",
            [("ecoli", ecoli_run)],
        )
        report = col.report(sent.ms2)
        for _ in range(100):  # the run's file is written after its last answer
            if daemon.finished:
                break
            await asyncio.sleep(0.05)
        metrics = scrape(daemon.endpoints.metrics_port)
    n_ms2 = sum(1 for s in ecoli_run if s.ms_level == 2)
    assert report.sent == n_ms2 == 139
    assert report.lost == 0 and report.duplicates == 0 and report.unexpected == 0
    assert report.by_status.get("identified", 0) > 10  # live: none before 50 scored (`rtsearch.search.live`)
    assert sum(report.by_status.values()) == n_ms2
    results = col.results()
    for r in results:
        assert r["v"] == 1 and r["run"] == "ecoli"
        assert r["sent_ns"] <= r["received_ns"] <= r["published_ns"]
        if r["status"] in ("identified", "unidentified") and r.get("peptide"):
            assert 0 <= r["q_value"] <= 1 and r["charge"] in (2, 3, 4) and isinstance(r["proteins"], list)
    # the daemon's own counters agree with the collector
    assert metrics["rtsearch_ready"] == 1
    assert sum(v for k, v in metrics.items() if k.startswith("rtsearch_results_total{")) == n_ms2
    assert metrics['rtsearch_spectra_received_total{ms_level="2"}'] == n_ms2
    assert metrics["rtsearch_latency_seconds_count"] == n_ms2
    # what the admission sheds by: every spectrum's age on arrival (the sender stamps sent_ns), the model, the advice
    received = sum(v for k, v in metrics.items() if k.startswith("rtsearch_spectra_received_total{"))
    assert metrics["rtsearch_arrival_age_seconds_count"] == received >= n_ms2
    assert 0 < metrics["rtsearch_arrival_age_seconds_sum"] / received < 1.0
    assert metrics["rtsearch_intake_wait_seconds_count"] == received
    assert 0 < metrics["rtsearch_intake_wait_seconds_sum"] / received < 1.0
    model = {t: metrics[f'rtsearch_engine_model_seconds{{term="{t}"}}'] for t in ("fixed", "per_spectrum")}
    assert min(model.values()) >= 0 and sum(model.values()) > 0, model  # a batch takes time (either term may be 0)
    assert metrics["rtsearch_admission_wait_seconds"] >= 0
    assert metrics["rtsearch_identifications_total"] == report.by_status["identified"]
    # the executors' stats (`Executor.stats`): each scored spectrum and batch counted once, by the path that scored it
    executed = {k: v for k, v in metrics.items() if k.startswith("rtsearch_executor_")}
    scored = report.by_status.get("identified", 0) + report.by_status.get("unidentified", 0)
    assert executed['rtsearch_executor_spectra_total{path="daemon"}'] == scored, executed
    assert executed['rtsearch_executor_batches_total{path="daemon"}'] == metrics["rtsearch_engine_batch_seconds_count"]
    assert executed['rtsearch_executor_failures_total{path="daemon"}'] == 0
    busy = executed['rtsearch_executor_busy_seconds_total{path="daemon"}']
    assert 0 < busy <= metrics["rtsearch_engine_batch_seconds_sum"]
    # the run's results file: the offline columns, one row per MS2 spectrum
    (done,) = daemon.finished
    with open(done.path, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == n_ms2 and {int(r["scan"]) for r in rows} == {s for _, s in sent.ms2}
    # the Ecoli floor of the search-core issue (85 by decoys / targets at 1 %); 139 spectra hold no list at 1 % under
    # (decoys + 1) / targets: 92 at 5 %
    assert done.summary.psms_at_5pct >= 85 and done.summary.psms_at_1pct == 0
    # the run was finished in the refit process (a loaded index has a folder), not in the daemon's
    assert engine.index.folder is not None
    assert not [r for r in caplog.records if "finishing here" in r.getMessage()]


async def test_malformed_messages_are_answered_or_counted_and_never_stop_intake(engine, ecoli_run, tmp_path):
    cfg = serve_config(tmp_path)
    good = [s for s in ecoli_run if s.ms_level == 2][:3]
    async with running(engine, cfg) as daemon:
        col = Collector(daemon.endpoints.results)
        await asyncio.to_thread(col.start)
        ctx = zmq.Context.instance()
        push = ctx.socket(zmq.PUSH)
        push.connect(daemon.endpoints.spectra)
        frames = wire.encode_spectrum(good[0])
        header = json.loads(frames[1])
        bad_version = [frames[0], json.dumps({**header, "v": 2, "scan": 901}).encode(), *frames[2:]]
        short_peaks = [frames[0], json.dumps({**header, "scan": 902}).encode(), frames[2][:-8], frames[3]]
        for msg in ([b"garbage"], [b"spectrum", b"{not json"], [b"hello", b"{}"], bad_version, short_peaks):
            push.send_multipart(msg)
        for sp in good:
            push.send_multipart(wire.encode_spectrum(sp))
        await asyncio.to_thread(col.wait, 5, idle_s=10, timeout_s=60)
        col.stop()
        push.close()
        metrics = scrape(daemon.endpoints.metrics_port)
    by_scan = {r["scan"]: r for r in col.results()}
    assert by_scan[901]["status"] == "invalid" and "version" in by_scan[901]["reason"]
    assert by_scan[902]["status"] == "invalid" and "n=" in by_scan[902]["reason"]
    assert all(by_scan[s.scan]["status"] in ("identified", "unidentified") for s in good)
    assert len(by_scan) == 5
    assert metrics['rtsearch_invalid_total{reason="frames"}'] == 1
    assert metrics['rtsearch_invalid_total{reason="header"}'] == 1
    assert metrics['rtsearch_invalid_total{reason="topic"}'] == 1
    assert metrics['rtsearch_invalid_total{reason="version"}'] == 1
    assert metrics['rtsearch_invalid_total{reason="peaks"}'] == 1
    assert metrics['rtsearch_results_total{status="invalid"}'] == 2


async def test_overload_sheds_with_a_reason_and_loses_nothing(engine, ecoli_run, tmp_path):
    cfg = serve_config(tmp_path, max_batch=4, max_queue=8, workers=1)
    ms2 = [s for s in ecoli_run if s.ms_level == 2]
    async with running(engine, cfg) as daemon:
        # everything at once: far more than 8 waiting spectra
        sent, col = await asyncio.to_thread(
            _send_and_collect, daemon.endpoints.spectra, daemon.endpoints.results, "push", [("burst", ms2)],
            rate=1e6,
        )
        metrics = scrape(daemon.endpoints.metrics_port)
    report = col.report(sent.ms2)
    assert report.lost == 0 and report.sent == len(ms2)
    shed = [r for r in col.results() if r["status"] == "shed"]
    assert shed and all("overload" in r["reason"] for r in shed)
    by_reason = {k: v for k, v in metrics.items() if k.startswith("rtsearch_shed_total{")}
    assert sum(by_reason.values()) == len(shed) and by_reason['rtsearch_shed_total{reason="shutdown"}'] == 0
    assert report.by_status["shed"] + report.by_status.get("identified", 0) + report.by_status.get(
        "unidentified", 0) == len(ms2)


async def test_a_run_reopened_after_its_end_gets_a_second_file_not_an_overwrite(engine, ecoli_run, tmp_path):
    ms2 = [s for s in ecoli_run if s.ms_level == 2]
    async with running(engine, serve_config(tmp_path)) as daemon:
        sent, col = await asyncio.to_thread(
            _send_and_collect, daemon.endpoints.spectra, daemon.endpoints.results, "push",
            [("again", ms2[:5]), ("again", ms2[5:8])],
        )  # fmt: skip
        for _ in range(200):
            if len(daemon.finished) == 2:
                break
            await asyncio.sleep(0.05)
    assert col.report(sent.ms2).lost == 0
    paths = sorted(f.path.name for f in daemon.finished)
    assert paths == ["again.part2.tsv", "again.tsv"]
    rows = {p: (tmp_path / "results" / p).read_text().count("\n") - 1 for p in paths}
    assert rows == {"again.tsv": 5, "again.part2.tsv": 3}


@pytest.mark.parametrize("intakes", [1, 2])
async def test_overload_is_answered_at_the_door(intakes, engine, ecoli_run, tmp_path):
    """Six runs at 2,500 spectra/s for 2 s with a 50 ms budget, far beyond the NumPy engine: every spectrum answered
    once; the intake processes shed at the door what the daemon's wait would make late (so those answers come
    at once), and each run's results file still books every spectrum, shed ones with their reason."""
    cfg = serve_config(tmp_path, budget_ms=50.0, intakes=intakes)
    ms2 = [s for s in ecoli_run if s.ms_level == 2]
    runs = [(f"door{k}", ms2) for k in range(6)]
    async with running(engine, cfg) as daemon:
        sent, col = await asyncio.to_thread(
            _send_and_collect, daemon.endpoints.spectra, daemon.endpoints.results, "push", runs, rate=2_500.0
        )
        for _ in range(200):
            if len(daemon.finished) == 6:
                break
            await asyncio.sleep(0.05)
        metrics = scrape(daemon.endpoints.metrics_port)
    report = col.report(sent.ms2)
    assert report.sent == 6 * len(ms2) and report.lost == 0 and report.duplicates == 0
    results = col.results()
    door = [r for r in results if r["status"] == "shed" and "answered at the door" in r["reason"]]
    assert door, ("nothing was shed at the door", {k: v for k, v in metrics.items() if "shed_total" in k})
    assert metrics['rtsearch_shed_total{reason="door"}'] == len(door)
    assert sum(v for k, v in metrics.items() if k.startswith("rtsearch_results_total{")) == report.sent
    # shed at the door means answered without waiting to be scored: within a second (the 50 ms budget itself, but for
    # a busy machine's stalls and the daemon's acknowledgement that it journaled them; how soon is bench's to measure)
    assert max((r["published_ns"] - r["received_ns"]) / 1e6 for r in door) < 1000.0
    assert sorted(d.summary.run for d in daemon.finished) == [f"door{k}" for k in range(6)]
    for done in daemon.finished:
        with open(done.path, newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        assert len(rows) == len(ms2) and done.summary.spectra == len(ms2)
        assert done.summary.by_status["shed"] == sum(1 for r in results if r["run"] == done.summary.run
                                                     and r["status"] == "shed")  # fmt: skip
