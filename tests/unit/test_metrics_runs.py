"""What the daemon's parts report (`rtsearch.serve.observe.stats`) becomes in Prometheus, through
`DaemonMetrics.record`."""

from __future__ import annotations

import numpy as np
from prometheus_client import generate_latest

from rtsearch.serve.observe.metrics import DaemonMetrics
from rtsearch.serve.observe.stats import Answered, Mqtt, Queue, Ready, Received, RunAnswered, Runs, Scored, Shed, Taken


def _text(m: DaemonMetrics) -> str:
    return generate_latest(m.registry).decode()


def _metrics() -> DaemonMetrics:
    m = DaemonMetrics()
    m.describe(backend="numpy", device="cpu", instrument="qe1", budget_s=0.05, mqtt=True, peptides=10,
               gpu_bytes=lambda: 0.0, searching="library")  # fmt: skip
    return m


def test_run_series_count_then_end() -> None:
    m = _metrics()
    m.record(Answered(np.array([0.001, 0.2]), 1, {"identified": 2}, [RunAnswered("run7", 5, 2, 12.5)]))
    m.record(Answered(np.array([0.003]), 0, {"unidentified": 3}, [RunAnswered("run7", 3, 1, 11.0)]))
    text = _text(m)
    assert 'rtsearch_run_results_total{instrument="qe1",run="run7"} 8.0' in text
    assert 'rtsearch_run_identifications_total{instrument="qe1",run="run7"} 3.0' in text
    assert 'rtsearch_run_score_threshold{instrument="qe1",run="run7"} 11.0' in text
    info = text.split("rtsearch_build_info", 2)[2]  # the info sample's labels
    assert 'instrument="qe1"' in info and 'searching="library"' in info
    assert "rtsearch_latency_budget_seconds 0.05" in text and "rtsearch_mqtt_configured 1.0" in text
    m.record(Runs(1, finished="run7", still_open=True))  # another segment of run7 is open: its series stay
    assert 'run="run7"' in _text(m)
    m.record(Runs(0, finished="run7"))
    text = _text(m)
    assert 'run="run7"' not in text and "rtsearch_runs_finished_total 2.0" in text and "rtsearch_runs_open 0.0" in text
    m.run_closed("qe1", "never-opened")  # no error


def test_each_stat_updates_its_metrics() -> None:
    m = _metrics()
    m.record(Ready(True), Received({2: 5, 1: 2}, {"peaks": 1}), Queue(7, 1), Taken(4, np.array([0.0004, 0.002])),
             Scored(0.003, {"score": 0.003, "lock": 0.0, "results": 0.001, "publish": 0.002, "gc": 0.0}),
             Shed("queue_full", 3), Mqtt(connected=True, dropped=2))  # fmt: skip
    m.record(Answered(np.array([0.0004, 0.06, 0.3]), 2, {"identified": 1, "shed": 2}, []))
    text = _text(m)
    for line in (
        "rtsearch_ready 1.0", 'rtsearch_spectra_received_total{ms_level="2"} 5.0',
        'rtsearch_spectra_received_total{ms_level="1"} 2.0', 'rtsearch_invalid_total{reason="peaks"} 1.0',
        "rtsearch_queue_depth 7.0", "rtsearch_batches_in_flight 1.0", "rtsearch_batch_size_count 1.0",
        'rtsearch_queue_wait_seconds_bucket{le="0.0005"} 1.0', 'rtsearch_queue_wait_seconds_bucket{le="0.002"} 2.0',
        "rtsearch_engine_batch_seconds_count 1.0", 'rtsearch_worker_seconds_total{stage="publish"} 0.002',
        'rtsearch_shed_total{reason="queue_full"} 3.0', "rtsearch_mqtt_connected 1.0",
        "rtsearch_mqtt_dropped_total 2.0",
        'rtsearch_results_total{status="identified"} 1.0', 'rtsearch_results_total{status="shed"} 2.0',
        "rtsearch_identifications_total 1.0", "rtsearch_deadline_missed_total 2.0",
        'rtsearch_latency_seconds_bucket{le="0.0005"} 1.0', 'rtsearch_latency_seconds_bucket{le="0.1"} 2.0',
        "rtsearch_latency_seconds_count 3.0",
    ):  # fmt: skip
        assert line in text, line
    m.record(Ready(False), Mqtt(connected=False))
    assert "rtsearch_ready 0.0" in _text(m) and "rtsearch_mqtt_connected 0.0" in _text(m)
