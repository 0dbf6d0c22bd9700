"""The daemon's /metrics as Prometheus scrapes it (issue 73): gzipped when asked, no ``_created`` series."""

from __future__ import annotations

import gzip
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from rtsearch.serve.observe.http import Health, MetricsServer


def test_metrics_are_gzipped_when_asked_and_counters_have_no_created_series():
    registry = CollectorRegistry()
    Counter("rtsearch_test_answers", "answers", registry=registry).inc(3)
    with MetricsServer(registry, Health(), port=0) as server:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept-Encoding": "gzip"}), timeout=10) as r:
            assert r.headers["Content-Encoding"] == "gzip"
            text = gzip.decompress(r.read()).decode()
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.headers["Content-Encoding"] is None
            assert r.read().decode() == text
    assert "rtsearch_test_answers_total 3.0" in text
    assert "_created" not in text
