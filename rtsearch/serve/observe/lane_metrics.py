"""The lanes' front's ``/metrics``: every lane's metrics, scraped when asked, each sample labelled ``lane``.

Each lane (`rtsearch.serve.lanes`) is a whole daemon with its own `rtsearch.serve.observe.metrics.DaemonMetrics` on a
loopback port; this collector reads their exposition with prometheus_client's parser and yields the families
merged (one family a name, a ``lane`` label on every sample), with the front's own process metrics as lane
``front`` and ``rtsearch_lane_runs_total`` (runs the registry gave each lane). Sum over ``lane`` for the
daemon's totals; rates, histograms and the dashboards' queries keep their meaning per lane.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Sequence

from prometheus_client import ProcessCollector
from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

SCRAPE_TIMEOUT_S = 2.0


class LaneMetrics(Collector):
    """The lanes' metrics merged (see the module docstring); ``runs``: the registry's count a lane, when known."""

    def __init__(self, ports: Sequence[int]) -> None:
        self.ports = list(ports)
        self.runs: Sequence[int] = ()
        self._process = ProcessCollector(registry=None)

    def collect(self) -> Iterable[Metric]:
        merged: dict[str, Metric] = {}
        sources: list[tuple[str, Iterable[Metric]]] = [("front", self._process.collect())]
        for k, port in enumerate(self.ports):
            sources.append((str(k), _scrape(port)))
        for lane, families in sources:
            for fam in families:
                out = merged.get(fam.name)
                if out is None:
                    out = merged[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
                elif out.type != fam.type:
                    continue  # a name typed differently by two lanes (never between versions of one build)
                for s in fam.samples:
                    out.add_sample(s.name, {**s.labels, "lane": lane}, s.value, s.timestamp, s.exemplar)
        yield from merged.values()
        runs = CounterMetricFamily("rtsearch_lane_runs", "Runs the front gave each lane (the registry's count)",
                                   labels=["lane"])  # fmt: skip
        for k, n in enumerate(self.runs):
            runs.add_metric([str(k)], n)
        yield runs


def _scrape(port: int) -> list[Metric]:
    """A lane's families (none when it does not answer: starting, or gone)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=SCRAPE_TIMEOUT_S) as r:
            text = r.read().decode()
    except OSError:
        return []
    return list(text_string_to_metric_families(text))
