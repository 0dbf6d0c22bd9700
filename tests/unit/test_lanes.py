"""The lanes' front's parts (`rtsearch.serve.router`, `rtsearch.serve.lanes`, `rtsearch.serve.lane_metrics`): a
message's run read from its header, one registry answer a run for every router, the lanes' metrics merged."""

from __future__ import annotations

import pytest
import zmq
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rtsearch.config import ConfigError, ServeConfig, validate_serve
from rtsearch.serve.lane_metrics import LaneMetrics
from rtsearch.serve.metrics import DaemonMetrics
from rtsearch.serve.router import LaneOf, Registry, run_of
from rtsearch.serve.stats import Shed


def test_the_run_is_read_from_any_header_and_none_from_a_malformed_one():
    assert run_of(b'{"v":1,"run":"a b/\\u00e9","scan":3}') == "a b/\u00e9"
    assert run_of(b'{"v": 1, "meta": {"run": "inner"}, "run": "outer"}') == "outer"
    for bad in (b"", b"not json", b'["run"]', b'{"v":1}', b'{"run":7}', b'{"run":null}'):
        assert run_of(bad) is None


def test_every_router_is_told_the_same_lane_a_run_and_runs_spread_over_open_lanes(tmp_path):
    ctx: zmq.Context = zmq.Context()
    registry = Registry(ctx, f"ipc://{tmp_path / 'reg'}", 3)
    try:
        routers = []
        for _ in range(2):
            req = ctx.socket(zmq.REQ)
            req.connect(registry.endpoint)
            routers.append(LaneOf(req))
        runs = [f"run{k}" for k in range(6)]
        first = [routers[k % 2]([b"spectrum", f'{{"v":1,"run":"{r}"}}'.encode()]) for k, r in enumerate(runs)]
        again = [routers[(k + 1) % 2]([b"spectrum", f'{{"run":"{r}","v":1}}'.encode()]) for k, r in enumerate(runs)]
        assert first == again == [0, 1, 2, 0, 1, 2]
        assert registry.runs == registry.open == [2, 2, 2]
        # runs ended on lanes 1 and 2 (told by whichever router passed the run.end on): new runs go there
        for r in ("run1", "run4", "run2"):
            assert routers[1]([b"run.end", f'{{"v":1,"run":"{r}","n_spectra":5}}'.encode()]) in (1, 2)
        assert registry.open == [2, 0, 1] and registry.runs == [2, 2, 2]
        assert [routers[0]([b"spectrum", f'{{"run":"new{k}"}}'.encode()]) for k in range(3)] == [1, 2, 1]
        for r in ("run0", "run3", "run5", "new0", "new1", "new2"):  # every run ended: runs one after another take turns
            routers[0]([b"run.end", f'{{"v":1,"run":"{r}"}}'.encode()])
        assert [routers[1]([b"spectrum", f'{{"run":"seq{k}"}}'.encode()]) for k in range(3)] == [0, 2, 1]
        assert routers[1]([b"spectrum", b'{"run":"run1"}']) == 1  # an ended run's late spectrum: the same lane
        assert routers[0]([b"spectrum", b"{broken"]) == 0  # no run: lane 0 answers it as malformed
        assert routers[0]([b"run.end"]) == 0
    finally:
        for lane_of in routers:
            lane_of._req.close(0)
        registry.close()
        ctx.term()


def test_the_lanes_metrics_come_merged_with_a_lane_label():
    lanes = [DaemonMetrics(), DaemonMetrics()]
    servers = [m.serve(0) for m in lanes]
    try:
        lanes[0].record(Shed("door", 3))
        lanes[1].record(Shed("door", 5))
        merged = LaneMetrics([s.port for s in servers])
        merged.runs = [4, 1]
        registry = CollectorRegistry()
        registry.register(merged)
        text = generate_latest(registry).decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}  # one family a name: parseable
        shed = {(s.labels["lane"], s.labels["reason"]): s.value for s in families["rtsearch_shed"].samples
                if s.name == "rtsearch_shed_total"}  # fmt: skip
        assert shed[("0", "door")] == 3 and shed[("1", "door")] == 5
        runs = {s.labels["lane"]: s.value for s in families["rtsearch_lane_runs"].samples if s.name.endswith("_total")}
        assert runs == {"0": 4, "1": 1}
        assert {s.labels["lane"] for s in families["process_cpu_seconds"].samples} == {"front", "0", "1"}
        assert text.count("# TYPE rtsearch_shed_total counter") == 1
    finally:
        for s in servers:
            s.close()
    # a lane that does not answer is left out, not an error
    assert list(LaneMetrics([servers[0].port]).collect())


def test_lanes_and_a_cluster_are_refused_together():
    with pytest.raises(ConfigError, match="lanes and cluster"):
        validate_serve(ServeConfig(lanes=2, cluster=2))
    with pytest.raises(ConfigError, match="lanes"):
        validate_serve(ServeConfig(lanes=0))
