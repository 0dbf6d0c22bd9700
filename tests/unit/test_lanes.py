"""The lanes' front's parts (`rtsearch.serve.intake.routing`, `rtsearch.serve.intake.reader`,
`rtsearch.serve.observe.lane_metrics`): one lane a run for every intake process, runs spread over the open lanes, an
intake process building each lane's chunks of its runs, the lanes' metrics merged."""

from __future__ import annotations

import dataclasses

import pytest
import zmq
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rtsearch.config import ConfigError, ServeConfig, validate_serve
from rtsearch.io.spectra import read_spectra
from rtsearch.protocol import wire
from rtsearch.serve.intake.chunks import INT_COLUMNS, Received, SpectraChunk
from rtsearch.serve.intake.reader import Reader
from rtsearch.serve.intake.routing import LaneOf, Registry
from rtsearch.serve.observe.lane_metrics import LaneMetrics
from rtsearch.serve.observe.metrics import DaemonMetrics
from rtsearch.serve.observe.stats import Shed

_SCAN = INT_COLUMNS.index("scan")


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


def test_the_registry_answers_any_name_and_a_malformed_request_and_goes_on(lanes3):
    # before: a name that is not strict UTF-8 (a `LaneOf` encodes with surrogatepass) ended the registry's thread,
    # and every intake process then waited for ever on its answer
    registry, (a, b) = lanes3
    odd = "run\udc80"  # a lone surrogate
    assert a(odd) == 0 and b(odd) == 0 and registry.runs == [1, 0, 0]
    a._req.send_multipart([b"lane", b"x", b"extra"])  # three parts: answered with nothing, counted nowhere
    assert a._req.recv() == b"" and registry.runs == [1, 0, 0]
    a.end(odd)
    assert registry.open == [0, 0, 0] and registry.alive() and b("next") == 1


def test_an_intake_process_builds_each_lanes_chunks_of_its_runs(lanes3, data, tmp_path):
    registry, (a, _) = lanes3
    assert [a(r) for r in ("x", "y", "z")] == [0, 1, 2]
    spectra = [s for s in read_spectra(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2][:9]
    runs = ["y", "x", "z"] * 3  # interleaved, as the door spreads several senders' messages
    messages = [wire.encode_spectrum(dataclasses.replace(sp, run=run, scan=k + 1))
                for k, (sp, run) in enumerate(zip(spectra, runs, strict=True))]  # fmt: skip
    messages[4:4] = [wire.encode_run_end("y", 4), [b"spectrum", b"{not json"]]
    ctx: zmq.Context = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    pull.bind(f"ipc://{tmp_path / 'door'}")
    push.connect(f"ipc://{tmp_path / 'door'}")
    try:
        for frames in messages:
            push.send_multipart(frames)
        reader = Reader(pull, lanes=a, n_lanes=3)
        shares: list[list] = [[], [], []]
        while sum(len(i) if isinstance(i, SpectraChunk) else 1 for s in shares for i in s) < len(messages):
            assert pull.poll(2000), "messages did not arrive"
            for mine, got in zip(shares, reader.read_lanes(), strict=True):
                mine.extend(got)
    finally:
        push.close(0)
        pull.close(0)
        ctx.term()
    for lane, run in enumerate(("x", "y", "z")):
        chunks = [i for i in shares[lane] if isinstance(i, SpectraChunk)]
        assert {r for c in chunks for r in c.runs} == {run}  # only its runs, each chunk built for it
        scans = [s for c in chunks for s in c.ints[:, _SCAN].tolist()]
        assert scans == [k + 1 for k, r in enumerate(runs) if r == run]
        for c in chunks:  # peaks and all, in order
            for row, scan in enumerate(c.ints[:, _SCAN].tolist()):
                assert c.mz[c.offsets[row]:c.offsets[row + 1]].tolist() == spectra[scan - 1].mz.tolist()
    (end,) = [i for i in shares[1] if isinstance(i, Received)]
    assert isinstance(end.message, wire.RunEnd) and registry.open == [1, 0, 1]  # the run.end told the registry
    (broken,) = [i for i in shares[0] if isinstance(i, Received)]
    assert isinstance(broken.message, wire.Invalid)  # naming no run: lane 0 answers it as malformed


def test_behind_the_lanes_front_an_intake_coalesces_twice_as_long(lanes3, monkeypatch):
    registry, (a, _) = lanes3
    ctx: zmq.Context = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    try:
        # four intake processes: each waits up to 4 ms for a lone daemon, 8 ms for lanes (each lane's chunk smaller)
        assert Reader(pull, share=4).flush_ns == 4_000_000
        assert Reader(pull, share=4, lanes=a, n_lanes=3).flush_ns == 8_000_000
        monkeypatch.setenv("RTSEARCH_INTAKE_FLUSH_MS", "0.5")  # the benchmarks' knob, for both
        assert Reader(pull, share=4).flush_ns == Reader(pull, share=4, lanes=a, n_lanes=3).flush_ns == 2_000_000
        monkeypatch.setenv("RTSEARCH_INTAKE_FLUSH_MS", "soon")  # not a number: the default, with a warning
        assert Reader(pull, share=2, lanes=a, n_lanes=3).flush_ns == 4_000_000
    finally:
        pull.close(0)
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


def test_lanes_need_at_least_one_and_may_each_have_a_cluster():
    with pytest.raises(ConfigError, match="lanes"):
        validate_serve(ServeConfig(lanes=0))
    validate_serve(ServeConfig(lanes=2, cluster=2))  # each lane its own cluster (tests/integration/test_lanes.py)


def test_lanes_spread_over_the_gpus_this_process_was_given(monkeypatch):
    from rtsearch.serve.children import runtime

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")  # the front given GPUs 2 and 3: its GPUs 0 and 1 are those
    assert [runtime.gpu_of(k % 2) for k in range(5)] == ["2", "3", "2", "3", "2"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    asked = []
    monkeypatch.setattr(runtime, "host_gpus", lambda: asked.append(1) or 2)
    assert [runtime.gpu_of(k % 2) for k in range(3)] == ["0", "1", "0"]
    # a child works out its device without asking the driver: once CUDA has counted every GPU in a process,
    # setting CUDA_VISIBLE_DEVICES there no longer narrows it (its work would land on GPU 0)
    assert not asked


def test_a_lanes_cluster_sees_every_gpu_its_workers_following_the_previous_lanes(monkeypatch):
    """Lane k alone: GPU k mod G. With a cluster of N a lane (`--lanes K --cluster N`), every GPU, the list turned to
    start at k·N mod G: its worker i on the i-th, so a partition's pieces go one a GPU and the lanes' workers round
    the GPUs in turn (pinned to one GPU, a lane's two pieces shared it and the other stayed idle)."""
    from rtsearch.serve.lanes import lane_device

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [lane_device(k, 2) for k in range(3)] == ["0", "1", "0"]
    assert lane_device(0, 0) == lane_device(1, 0, 2) == ""  # no GPU: as inherited
    assert [lane_device(k, 2, 1) for k in range(4)] == ["0,1", "1,0", "0,1", "1,0"]  # worker 0 on GPU k mod 2
    assert [lane_device(k, 2, 2) for k in range(2)] == ["0,1", "0,1"]  # pieces 0, 1 on GPUs 0, 1 in each lane
    assert [lane_device(k, 4, 2) for k in range(3)] == ["0,1,2,3", "2,3,0,1", "0,1,2,3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,7")  # the front given GPUs 6 and 7
    assert [lane_device(k, 2, 1) for k in range(2)] == ["6,7", "7,6"]


def test_a_lanes_cluster_worker_has_its_share_of_a_gpu_among_every_lanes_workers(monkeypatch):
    """Two lanes of two workers on two GPUs: two workers a GPU, each with 60 % of half of it (alone: of all of it),
    so that `cluster_mode = "auto"` partitions what the lanes together could not hold."""
    from rtsearch.cluster import serve as cluster_serve

    monkeypatch.setattr(cluster_serve, "_gpu_memory", lambda: 80e9)
    monkeypatch.setattr(cluster_serve, "host_gpus", lambda: 2)
    alone = ServeConfig(cluster=2, gpus_per_worker=1.0)
    assert cluster_serve.worker_memory(alone, "cupy") == pytest.approx(0.6 * 80e9)
    assert cluster_serve.worker_memory(ServeConfig(cluster=2, gpus_per_worker=1.0, lanes=2), "cupy") == pytest.approx(
        0.6 * 40e9)
    assert cluster_serve.worker_memory(ServeConfig(cluster=1, gpus_per_worker=1.0, lanes=2), "cupy") == pytest.approx(
        0.6 * 80e9)  # one worker a lane, a GPU each
    assert cluster_serve.worker_memory(alone, "numpy") == float("inf")


def test_a_lanes_metrics_port_is_held_from_when_it_is_chosen_and_served_on_that_socket(tmp_path):
    # the front binds each lane's /metrics socket when it picks the port (`lanes._Lane`): nothing else can take the
    # port before the lane listens (a port picked, let go and bound by the lane later was taken once in between)
    import socket
    import urllib.request

    from rtsearch.serve.lanes import _Lane
    from rtsearch.serve.observe.http import Health, MetricsServer

    lane = _Lane(0, tmp_path, intakes=1)
    assert lane.listener is not None and lane.listener.getsockname()[1] == lane.metrics_port
    with socket.socket() as other, pytest.raises(OSError):
        other.bind(("127.0.0.1", lane.metrics_port))
    def ready() -> bool:  # /readyz on the port the front chose
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{lane.metrics_port}/readyz", timeout=1.0) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    assert not ready()  # bound, not yet listening: a probe waits
    health = Health()
    health.set(ready=True)
    with MetricsServer(CollectorRegistry(), health, port=0, bound=lane.listener) as server:
        assert server.port == lane.metrics_port
        assert ready()
        with urllib.request.urlopen(f"http://127.0.0.1:{lane.metrics_port}/healthz", timeout=2) as r:
            assert r.status == 200
