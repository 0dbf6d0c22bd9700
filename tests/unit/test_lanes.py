"""The lanes' front's parts (`rtsearch.serve.routing`, `rtsearch.serve.lane_metrics`): one lane a run for every
intake process, runs spread over the open lanes, what an intake process read cut into each lane's share, the
lanes' metrics merged."""

from __future__ import annotations

import numpy as np
import pytest
import zmq
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rtsearch import wire
from rtsearch.config import ConfigError, ServeConfig, validate_serve
from rtsearch.serve.chunks import FLOAT_COLUMNS, INT_COLUMNS, Received, SpectraChunk
from rtsearch.serve.lane_metrics import LaneMetrics
from rtsearch.serve.metrics import DaemonMetrics
from rtsearch.serve.routing import LaneOf, Registry, split
from rtsearch.serve.stats import Shed

_RUN, _SCAN = INT_COLUMNS.index("run"), INT_COLUMNS.index("scan")


@pytest.fixture()
def lanes3(tmp_path):
    """A registry of three lanes and two intake processes' clients of it."""
    ctx: zmq.Context = zmq.Context()
    registry = Registry(ctx, f"ipc://{tmp_path / 'reg'}", 3)
    clients = []
    for _ in range(2):
        req = ctx.socket(zmq.REQ)
        req.connect(registry.endpoint)
        clients.append(LaneOf(req))
    yield registry, clients
    for lane_of in clients:
        lane_of._req.close(0)
    registry.close()
    ctx.term()


def test_every_intake_process_is_told_the_same_lane_a_run_and_runs_spread_over_open_lanes(lanes3):
    registry, (a, b) = lanes3
    runs = [f"run{k}" for k in range(6)]
    first = [(a if k % 2 else b)(r) for k, r in enumerate(runs)]
    again = [(b if k % 2 else a)(r) for k, r in enumerate(runs)]
    assert first == again == [0, 1, 2, 0, 1, 2]
    assert registry.runs == registry.open == [2, 2, 2]
    for r in ("run1", "run4", "run2"):  # their run.end passed (whichever process tells): new runs go there
        b.end(r)
    assert registry.open == [2, 0, 1] and registry.runs == [2, 2, 2]
    assert [a(f"new{k}") for k in range(3)] == [1, 2, 1]
    for r in ("run0", "run3", "run5", "new0", "new1", "new2"):  # all ended: runs one after another take turns
        a.end(r)
    assert [b(f"seq{k}") for k in range(3)] == [0, 2, 1]
    assert b("run1") == 1  # an ended run's late spectrum: the same lane


def _chunk(runs: list[str], run_col: list[int], n_peaks: list[int]) -> SpectraChunk:
    ints = np.zeros((len(run_col), len(INT_COLUMNS)), np.int64)
    ints[:, _RUN], ints[:, _SCAN] = run_col, np.arange(len(run_col)) + 1
    offsets = np.concatenate([[0], np.cumsum(n_peaks)]).astype(np.int64)
    mz = 100.0 + np.arange(offsets[-1], dtype=np.float64)
    return SpectraChunk(runs, [(2,)] * len(run_col), ints, np.zeros((len(run_col), len(FLOAT_COLUMNS))), mz,
                        mz.astype(np.float32), offsets)  # fmt: skip


def test_what_an_intake_process_read_is_cut_into_each_lanes_share(lanes3):
    registry, (a, _) = lanes3
    assert [a(r) for r in ("x", "y", "z")] == [0, 1, 2]
    whole = _chunk(["x"], [0, 0], [1, 2])
    mixed = _chunk(["x", "y", "z"], [1, 0, 2, 1], [1, 2, 0, 3])  # rows of y, x, z, y
    end_y = Received(wire.RunEnd("y", 2), 0, 0)
    broken = Received(wire.Invalid("header", "not JSON"), 0, 0)
    shares = split([whole, mixed, end_y, broken], a, 3)
    assert shares[0][0] is whole  # a chunk of one lane's runs goes whole
    x_part, y_part, z_part = shares[0][1], shares[1][0], shares[2][0]
    assert x_part.runs == ["x"] and x_part.ints[:, _SCAN].tolist() == [2] and x_part.mz.tolist() == [101.0, 102.0]
    assert y_part.runs == ["y"] and y_part.ints[:, _SCAN].tolist() == [1, 4] and y_part.ints[:, _RUN].tolist() == [0, 0]
    assert y_part.mz.tolist() == [100.0, 103.0, 104.0, 105.0] and y_part.offsets.tolist() == [0, 1, 4]
    assert z_part.runs == ["z"] and len(z_part.mz) == 0
    assert shares[1][1] is end_y and registry.open == [1, 0, 1]  # the run.end told the registry
    assert shares[0][2] is broken  # naming no run: lane 0 answers it as malformed


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
