"""A failing part is never silent: each is killed in turn under a real daemon.

- the intake process killed: not ready, the daemon shuts down answering what it had, `run` raises
  `ServiceError` (the process exits non-zero: systemd's ``Restart=on-failure`` starts it again);
- an engine thread stopped by an exception no handler expects: the same, its batch answered ``shed``;
- building a batch's results failing: the batch answered ``unidentified`` with the error, the daemon
  goes on serving;
- the MQTT publisher's task gone: restarted, later identifications reach the broker;
- the journals' fsync thread stopped: the daemon stops non-zero, its open run finished.

Before issue 15 the intake's death ended the daemon with exit code 0, and a dead engine thread left
it "ready" with a growing queue and nothing answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from collections.abc import Iterator

import pytest

from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.errors import ServiceError
from rtsearch.protocol.wire import encode_run_end, encode_run_start, encode_spectrum
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import LiveRun
from rtsearch.serve.daemon import Daemon
from rtsearch.serve.outputs.mqtt import MqttOutput
from rtsearch.types import Spectrum
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, load_run
from tests.integration.test_mqtt import Listener, _wait
from tests.streaming import Mosquitto, serve_config

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module")
def run(data) -> list[Spectrum]:
    return [dataclasses.replace(s, run="sup") for s in load_run(data / "ecoli-small/Ecoli_MS2_small.mzML")
            if s.ms_level == 2]  # fmt: skip


@pytest.fixture()
def target(demo_index) -> DatabaseTarget:
    return DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))


async def _start(target, cfg) -> tuple[Daemon, asyncio.Event, asyncio.Task[None]]:
    daemon, stop = Daemon(target, cfg), asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    ready = asyncio.create_task(daemon.ready.wait())
    await asyncio.wait({task, ready}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    return daemon, stop, task


def _send(endpoint: str, frames: Iterator[list[bytes]]) -> None:
    with Sender(endpoint, mode="push", wait_s=20) as s:
        for f in frames:
            s.send(f)


def _ready(daemon: Daemon) -> float | None:
    return daemon.metrics.registry.get_sample_value("rtsearch_ready")


@pytest.mark.parametrize("intakes", [1, 3])
async def test_intake_killed_stops_the_daemon_non_zero(intakes, target, run, tmp_path):
    """Also one of three intake processes, while the other two go on handing over (the supervisor notices)."""
    daemon, stop, task = await _start(target, serve_config(tmp_path, intakes=intakes))
    col = await asyncio.to_thread(Collector(daemon.endpoints.results).start)
    await asyncio.to_thread(_send, daemon.endpoints.spectra, iter([encode_run_start("sup"),
                                                                   *map(encode_spectrum, run[:20])]))  # fmt: skip
    await asyncio.to_thread(col.wait, 20, idle_s=10, timeout_s=60)
    assert _ready(daemon) == 1 and daemon.intake is not None and daemon.intake.pid
    os.kill(daemon.intake.pid, signal.SIGKILL)
    with pytest.raises(ServiceError, match="intake"):
        await asyncio.wait_for(task, 60)
    col.stop()
    assert _ready(daemon) == 0
    assert sorted(r["scan"] for r in col.results()) == sorted(s.scan for s in run[:20])
    (done,) = daemon.finished  # the open run was finished before the daemon stopped
    assert done.summary.spectra == 20 and done.path.exists()


class Stop(BaseException):
    """What no handler of the engine thread expects."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread's end, injected
async def test_a_stopped_engine_thread_stops_the_daemon_non_zero(target, run, tmp_path, monkeypatch):
    score = target.score

    def failing(spectra):
        if run[30].scan in spectra.scan:
            raise Stop
        return score(spectra)

    monkeypatch.setattr(target, "score", failing)
    daemon, stop, task = await _start(target, serve_config(tmp_path, max_batch=4))
    col = await asyncio.to_thread(Collector(daemon.endpoints.results).start)
    await asyncio.to_thread(_send, daemon.endpoints.spectra, iter([encode_run_start("sup"),
                                                                   *map(encode_spectrum, run[:40])]))  # fmt: skip
    with pytest.raises(ServiceError, match="engine worker"):
        await asyncio.wait_for(task, 60)
    await asyncio.to_thread(col.wait, 40, idle_s=5, timeout_s=30)
    col.stop()
    assert _ready(daemon) == 0
    by_scan = {r["scan"]: r for r in col.results()}
    assert sorted(by_scan) == sorted(s.scan for s in run[:40])  # every spectrum answered, once
    assert by_scan[run[30].scan]["status"] == "shed" and "shutting down" in by_scan[run[30].scan]["reason"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread's end, injected
async def test_a_stopped_journal_fsync_thread_stops_the_daemon_non_zero(target, run, tmp_path, monkeypatch):
    # before, the thread that fsyncs the journals could end and the daemon went on answering what it never synced
    import threading

    from rtsearch.serve.runs.journal import Journals

    sync = Journals.sync

    def failing(self: Journals) -> None:
        if threading.current_thread().name == "journal-fsync":
            raise Stop
        sync(self)

    daemon, stop, task = await _start(target, serve_config(tmp_path))
    col = await asyncio.to_thread(Collector(daemon.endpoints.results).start)
    await asyncio.to_thread(_send, daemon.endpoints.spectra, iter([encode_run_start("sup"),
                                                                   *map(encode_spectrum, run[:20])]))  # fmt: skip
    await asyncio.to_thread(col.wait, 20, idle_s=10, timeout_s=60)
    monkeypatch.setattr(Journals, "sync", failing)  # its next round ends it
    with pytest.raises(ServiceError, match="fsync thread stopped"):
        await asyncio.wait_for(task, 60)
    col.stop()
    assert _ready(daemon) == 0
    assert sorted(r["scan"] for r in col.results()) == sorted(s.scan for s in run[:20])
    (done,) = daemon.finished  # the open run was finished (its file written) before the daemon stopped
    assert done.summary.spectra == 20 and done.path.exists()


async def test_results_that_fail_to_build_are_answered_and_the_daemon_goes_on(target, run, tmp_path, monkeypatch):
    add_scored, failed = LiveRun.add_scored, []

    def once(self, batch):
        if not failed:
            failed.append(len(batch))
            raise RuntimeError("injected")
        return add_scored(self, batch)

    monkeypatch.setattr(LiveRun, "add_scored", once)
    daemon, stop, task = await _start(target, serve_config(tmp_path))
    col = await asyncio.to_thread(Collector(daemon.endpoints.results).start)
    # the first spectra: a batch of them fails; then the rest, which must be scored as usual
    await asyncio.to_thread(_send, daemon.endpoints.spectra, iter([encode_run_start("sup"),
                            *map(encode_spectrum, run[:10])]))  # fmt: skip
    await asyncio.to_thread(col.wait, 10, idle_s=10, timeout_s=60)
    await asyncio.to_thread(_send, daemon.endpoints.spectra, iter([*map(encode_spectrum, run[10:50]),
                            encode_run_end("sup", 50)]))  # fmt: skip
    await asyncio.to_thread(col.wait, 50, idle_s=10, timeout_s=60)
    col.stop()
    assert _ready(daemon) == 1 and not task.done()
    stop.set()
    await asyncio.wait_for(task, 60)
    results = col.results()
    assert sorted(r["scan"] for r in results) == sorted(s.scan for s in run[:50])
    errors = [r for r in results if "internal error: RuntimeError: injected" in r.get("reason", "")]
    assert len(errors) == failed[0] and all(r["status"] == "unidentified" for r in errors)
    # the rest was scored (a run of 50 gets no running q-values: `rtsearch.search.live.LIVE_FROM`)
    assert failed[0] <= 10 and sum("peptide" in r and not r.get("reason") for r in results) > 10


async def test_the_mqtt_publisher_is_restarted(target, run, tmp_path):
    broker = Mosquitto(tmp_path).start()
    listener = None
    try:
        # identified at 20 %: 60 spectra of a run hold a few dozen targets, and (decoys + 1) / targets gives them
        # at least 1 / targets
        cfg = serve_config(tmp_path, mqtt=broker.address, instrument="sup", identified_at=0.2)
        daemon, stop, task = await _start(target, cfg)
        (output,) = [out for out in daemon.outputs if isinstance(out, MqttOutput)]
        mqtt = output.mqtt
        assert mqtt is not None and await asyncio.to_thread(_wait, lambda: mqtt.connected)
        listener = Listener(broker.port, "sup")
        assert await asyncio.to_thread(_wait, lambda: b"online" in listener.on("rtsearch/sup/status"))
        old = mqtt._task
        assert old is not None
        old.cancel()  # the publisher's task gone, as a bug would end it
        assert await asyncio.to_thread(_wait, lambda: mqtt._task is not old and mqtt.connected, 10)
        col = await asyncio.to_thread(Collector(daemon.endpoints.results).start)
        await asyncio.to_thread(_send, daemon.endpoints.spectra, iter([encode_run_start("sup"),
                                *map(encode_spectrum, run[:60]), encode_run_end("sup", 60)]))  # fmt: skip
        await asyncio.to_thread(col.wait, 60, idle_s=10, timeout_s=60)
        col.stop()
        identified = {r["scan"] for r in col.results() if r["status"] == "identified"}
        assert identified
        assert await asyncio.to_thread(_wait, lambda: len(listener.on("rtsearch/sup/sup/psm")) == len(identified), 20)
        assert _ready(daemon) == 1
        stop.set()
        await asyncio.wait_for(task, 60)
    finally:
        if listener is not None:
            listener.stop()
        broker.kill()
