"""A cluster's sockets against peers that are not its workers (issue 67, S1), under a real daemon (local
placement, NumPy workers, the bundled index):

- a DEALER calling itself ``w0`` that sends a pickle as its hello runs nothing, and the door goes on answering every
  spectrum (before: the pickle ran, the dispatcher thread died, every later spectrum was shed, the daemon said ready);
- off loopback the door's sockets are CURVE servers: a peer without the workers' key gets no hello registered and
  no batch, a keyed worker scores;
- a dispatcher thread that dies drops readiness and stops the daemon with `ServiceError` (exit 1)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import threading
import time
from pathlib import Path

import pytest
import zmq

from rtsearch.cluster.door import ClusterScorer
from rtsearch.errors import ServiceError
from rtsearch.protocol.wire import encode_run_start, encode_spectrum
from rtsearch.serve.daemon import Daemon
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender
from tests.streaming import replay_through, running, serve_config
from tests.unit.test_cluster_auth import own_address

pytestmark = pytest.mark.asyncio


class Evil:
    """What the adversarial client pickled: unpickling it runs a shell command (here: it makes ``marker``)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return os.system, (f"touch {self.marker}",)


def _until(done, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(done())


def _rogue(endpoint: str, frames: list[bytes], *, identity: bytes = b"w0") -> None:
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity)
    sock.setsockopt(zmq.LINGER, 2000)  # sent before it closes
    sock.connect(endpoint)
    sock.send_multipart(frames)
    sock.close()


async def test_a_pickle_sent_as_a_workers_hello_runs_nothing_and_every_later_spectrum_is_answered(
    engine, ecoli_run, tmp_path
):  # fmt: skip
    marker = tmp_path / "pwned"
    cfg = serve_config(tmp_path, cluster=1, cluster_placement="local", budget_ms=10_000.0)
    async with running(engine, cfg) as daemon:
        door = daemon.pool.cluster
        assert door is not None and door.workers["w0"].alive
        await asyncio.to_thread(_rogue, door.router, [b"hello", pickle.dumps(Evil(marker))])
        # the frame is handled (dropped, counted) — or, before issue 67, the pickle ran and the thread died
        assert await asyncio.to_thread(_until, lambda: marker.exists() or not door._thread.is_alive()
                                       or getattr(door, "dropped", 0) > 0)  # fmt: skip
        assert not marker.exists(), "the door unpickled a peer's frame"
        assert door._thread.is_alive()
        sent, col = await replay_through(daemon, [("ecoli", ecoli_run)], rate=2000.0, idle_s=20, timeout_s=120)
        report = col.report(sent.ms2)
        assert door._thread.is_alive() and door.failed() == 0
    assert not marker.exists()
    assert report.lost == 0 and report.duplicates == 0 and report.sent == 139, report
    assert "shed" not in report.by_status and "invalid" not in report.by_status, report.by_status


async def test_a_daemon_whose_cluster_is_off_loopback_takes_only_its_keyed_worker(engine, ecoli_run, tmp_path):
    """This machine's non-loopback address (else loopback with ``cluster_curve``): the worker process, keyed by its
    spec, scores every spectrum; a peer without the key — plain, or CURVE with a key of its own — never has its hello
    taken nor gets a batch, even knowing the worker's name and token."""
    host = own_address()
    cfg = serve_config(tmp_path, cluster=1, cluster_placement="local", cluster_host=host or "127.0.0.1",
                       cluster_curve=host is None)  # fmt: skip
    async with running(engine, cfg) as daemon:
        door = daemon.pool.cluster
        assert door is not None and door.curve and door._keys is not None
        pid, identity = door.workers["w0"].pid, door._identity["w0"]
        ctx = zmq.Context.instance()
        plain, other_key = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER)
        public, secret = zmq.curve_keypair()
        other_key.curve_serverkey = door._keys.worker.server
        other_key.curve_publickey, other_key.curve_secretkey = public, secret
        for s in (plain, other_key):
            s.setsockopt(zmq.IDENTITY, identity)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.SNDTIMEO, 5000)  # a peer whose handshake was refused has nowhere to queue: no hang
            s.connect(door.router)
            with contextlib.suppress(zmq.Again):  # (refused before the hello was queued: it never connected)
                s.send_multipart([b"hello", b'{"name":"w0","piece":-1,"pid":1,"backend":"numpy","entries":0,'
                                            b'"device_bytes":0,"gpu":""}'])  # fmt: skip
        try:
            assert await asyncio.to_thread(_until, lambda: door.refused >= 1), door.refused
            sent, col = await replay_through(daemon, [("ecoli", ecoli_run)], rate=2000.0, idle_s=20, timeout_s=120)
            report = col.report(sent.ms2)
            assert not plain.poll(0) and not other_key.poll(0)  # no batch reached them
        finally:
            plain.close()
            other_key.close()
        assert door.workers["w0"].pid == pid and door.dropped == 0 and door.failed() == 0
    assert report.lost == 0 and report.sent == 139 and "shed" not in report.by_status, report


async def test_a_dead_door_thread_drops_readiness_and_stops_the_daemon_non_zero(engine, ecoli_run, tmp_path,
                                                                              monkeypatch):  # fmt: skip
    """The door's dispatcher thread stopped by what no handler expects: not ready, every spectrum answered, the
    daemon stops with `ServiceError` (exit 1) — before issue 67 it said ready and shed everything after."""
    armed = threading.Event()
    send_waiting = ClusterScorer._send_waiting

    def failing(self, now: float) -> None:
        if armed.is_set() and self._waiting:
            raise RuntimeError("injected")
        send_waiting(self, now)

    monkeypatch.setattr(ClusterScorer, "_send_waiting", failing)
    ms2 = [s for s in ecoli_run if s.ms_level == 2][:20]
    daemon, stop = Daemon(engine, serve_config(tmp_path, cluster=1, cluster_placement="local")), asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    ready = asyncio.create_task(daemon.ready.wait())
    await asyncio.wait({task, ready}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    assert daemon.ready.is_set() and _ready(daemon) == 1
    armed.set()
    col = await asyncio.to_thread(Collector(daemon.endpoints.results).start)

    def send() -> None:
        with Sender(daemon.endpoints.spectra, mode="push", wait_s=20) as s:
            for frames in [encode_run_start("ecoli"), *map(encode_spectrum, ms2)]:
                s.send(frames)

    await asyncio.to_thread(send)
    with pytest.raises(ServiceError, match="stopped"):
        await asyncio.wait_for(task, 120)
    await asyncio.to_thread(col.wait, len(ms2), idle_s=5, timeout_s=60)
    col.stop()
    assert _ready(daemon) == 0 and daemon.metrics.health.failure
    by_scan = {r["scan"]: r for r in col.results()}
    assert sorted(by_scan) == sorted(s.scan for s in ms2)  # every spectrum answered, once
    assert all(r.get("reason") for r in by_scan.values()), list(by_scan.values())[:3]  # with the reason, unscored


def _ready(daemon: Daemon) -> float | None:
    return daemon.metrics.registry.get_sample_value("rtsearch_ready")
