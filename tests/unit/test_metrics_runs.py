"""Per-run metrics: counted while the run is open, gone once it is closed."""

from __future__ import annotations

from prometheus_client import generate_latest

from rtsearch.serve.metrics import DaemonMetrics


def _text(m: DaemonMetrics) -> str:
    return generate_latest(m.registry).decode()


def test_run_series_count_then_end() -> None:
    m = DaemonMetrics()
    m.describe(backend="numpy", device="cpu", instrument="qe1", budget_s=0.05, mqtt=True, peptides=10,
               gpu_bytes=lambda: 0.0, searching="library")  # fmt: skip
    m.run_answered("qe1", "run7", 5, 2, 12.5)
    m.run_answered("qe1", "run7", 3, 1, 11.0)
    text = _text(m)
    assert 'rtsearch_run_results_total{instrument="qe1",run="run7"} 8.0' in text
    assert 'rtsearch_run_identifications_total{instrument="qe1",run="run7"} 3.0' in text
    assert 'rtsearch_run_score_threshold{instrument="qe1",run="run7"} 11.0' in text
    info = text.split("rtsearch_build_info", 2)[2]  # the info sample's labels
    assert 'instrument="qe1"' in info and 'searching="library"' in info
    assert "rtsearch_latency_budget_seconds 0.05" in text and "rtsearch_mqtt_configured 1.0" in text
    m.run_closed("qe1", "run7")
    m.run_closed("qe1", "never-opened")  # no error
    assert 'run="run7"' not in _text(m)
