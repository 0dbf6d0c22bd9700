"""`BulkHistogram`: a lone value (the usual call at a few hundred spectra a second) lands in the bucket a batch puts it
in, bounds and NaN included, and the gauges read at scrape show the latest values recorded."""

from __future__ import annotations

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest

from rtsearch.serve.observe.metrics import LATENCY_BUCKETS, BulkHistogram, DaemonMetrics
from rtsearch.serve.observe.stats import Queue


def test_values_one_at_a_time_count_as_the_same_values_in_one_batch() -> None:
    rng = np.random.default_rng(7)
    bounds = np.asarray(LATENCY_BUCKETS)
    values = np.concatenate([rng.exponential(0.01, 400), bounds, np.nextafter(bounds, 0), np.nextafter(bounds, 1),
                             [0.0, 5.0, np.inf, np.nan, -1.0]])  # fmt: skip
    one, batch = (BulkHistogram(f"h{k}", "test", LATENCY_BUCKETS, CollectorRegistry()) for k in (1, 2))
    for v in values:
        one.observe_many(np.array([v]))  # the lone path, as the daemon's one-spectrum arrays take it
    batch.observe_many(values)
    assert one._counts.tolist() == batch._counts.tolist()
    assert one._counts.sum() == len(values) - 1  # the NaN is not counted
    finite = values[np.isfinite(values)]
    assert np.isclose(one._sum - np.inf, batch._sum - np.inf, equal_nan=True)  # both +inf (the inf value)
    assert np.isclose(finite.sum(), sum(finite.tolist()))


def test_a_bound_counts_in_its_own_bucket_le() -> None:
    h = BulkHistogram("h", "test", (0.001, 0.002), CollectorRegistry())
    for v in (0.001, 0.0015, 0.002, 0.0021):
        h.observe(v)
    assert h._counts.tolist() == [1, 2, 1]  # le 0.001: 0.001; le 0.002: 0.0015 and 0.002; +Inf: 0.0021
    assert h._sum == 0.001 + 0.0015 + 0.002 + 0.0021


def test_queue_gauges_show_the_latest_values_when_scraped() -> None:
    m = DaemonMetrics()
    m.record(Queue(7, 1, 0.25, (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)), Queue(3, 2))  # the second says no advice, no model
    text = generate_latest(m.registry).decode()
    assert "rtsearch_queue_depth 3.0" in text and "rtsearch_batches_in_flight 2.0" in text
    assert "rtsearch_admission_wait_seconds 0.25" in text  # kept from the first
    assert 'rtsearch_engine_model_seconds{term="tail_per_spectrum"} 4.0' in text
