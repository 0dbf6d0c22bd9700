"""MQTT through a real Mosquitto started on a free port: topics, QoS, retained status, and a broker killed mid-run."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.serve.outputs.mqtt import MqttOutput
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, load_run, replay
from tests.streaming import Mosquitto, running, scrape, serve_config

pytestmark = pytest.mark.asyncio


class Listener:
    """A paho subscriber to rtsearch/<instrument>/# that resubscribes after reconnecting."""

    def __init__(self, port: int, instrument: str) -> None:
        self.messages: list[tuple[str, bytes, bool]] = []
        self.lock = threading.Lock()
        self.topic = f"rtsearch/{instrument}/#"
        self.client = paho.Client(CallbackAPIVersion.VERSION2)
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(self.topic, qos=1)
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(0.1, 0.5)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_message(self, c, u, msg) -> None:
        with self.lock:
            self.messages.append((msg.topic, msg.payload, bool(msg.retain)))

    def on(self, topic: str) -> list[bytes]:
        with self.lock:
            return [p for t, p, _ in self.messages if t == topic]

    def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def _wait(cond, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


async def test_mqtt_topics_and_a_broker_killed_mid_run(demo_index, data, tmp_path):
    run = load_run(data / "ecoli-small/Ecoli_MS2_small.mzML")
    engine = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    broker = Mosquitto(tmp_path).start()
    cfg = serve_config(tmp_path, mqtt=broker.address, instrument="lab1")
    listener = None
    try:
        async with running(engine, cfg) as daemon:
            (output,) = [out for out in daemon.outputs if isinstance(out, MqttOutput)]
            mqtt = output.mqtt
            assert mqtt is not None
            assert await asyncio.to_thread(_wait, lambda: mqtt.connected)
            listener = Listener(broker.port, "lab1")
            assert await asyncio.to_thread(_wait, lambda: b"online" in listener.on("rtsearch/lab1/status"))

            col = Collector(daemon.endpoints.results)
            await asyncio.to_thread(col.start)
            sent = Sent()

            def send(name: str, spectra, rate: float) -> None:
                with Sender(daemon.endpoints.spectra, mode="push", wait_s=20) as s:
                    replay(s, [(name, spectra)], speed=None, rate=rate, sent=sent)

            # first run, slowly; the broker dies once PSMs have come (a run's first 50 get no running q-values:
            # `rtsearch.search.live.LIVE_FROM`), about halfway through
            sender = asyncio.create_task(asyncio.to_thread(send, "before", run, 60.0))
            assert await asyncio.to_thread(_wait, lambda: listener.on("rtsearch/lab1/before/psm"), 60)
            psm_before_kill = len(listener.on("rtsearch/lab1/before/psm"))
            answered_before_kill = col.count()
            broker.kill()
            await sender
            await asyncio.to_thread(col.wait, len(sent.ms2), idle_s=20, timeout_s=120)
            down = scrape(daemon.endpoints.metrics_port)
            # scoring went on: every spectrum answered on ZeroMQ while MQTT was down
            assert col.report(sent.ms2).lost == 0
            assert down["rtsearch_mqtt_connected"] == 0
            assert down["rtsearch_mqtt_dropped_total"] > 0
            assert psm_before_kill > 0 and answered_before_kill < len(sent.ms2)  # killed mid-run

            # the broker comes back on the same port: the daemon reconnects and publishes again
            broker.start()
            assert await asyncio.to_thread(_wait, lambda: mqtt.connects >= 2, 30)
            # a second "online" (retained, republished on reconnect) proves the listener is subscribed again
            assert await asyncio.to_thread(
                _wait, lambda: listener.on("rtsearch/lab1/status").count(b"online") >= 2, 20
            )
            await asyncio.to_thread(send, "after", run[:80], 500.0)
            await asyncio.to_thread(col.wait, len(sent.ms2), idle_s=20, timeout_s=60)
            col.stop()
            assert col.report(sent.ms2).lost == 0
            assert await asyncio.to_thread(_wait, lambda: listener.on("rtsearch/lab1/after/summary"), 30)
            up = scrape(daemon.endpoints.metrics_port)
            assert up["rtsearch_mqtt_connected"] == 1
        # a clean shutdown says offline (retained)
        assert await asyncio.to_thread(_wait, lambda: listener.on("rtsearch/lab1/status")[-1:] == [b"offline"], 10)
        after = [json.loads(p) for p in listener.on("rtsearch/lab1/after/psm")]
        identified = [r for r in col.results() if r["run"] == "after" and r["status"] == "identified"]
        assert after and {(r["scan"], r["peptide"]) for r in after} == {(r["scan"], r["peptide"]) for r in identified}
        (summary,) = [json.loads(p) for p in listener.on("rtsearch/lab1/after/summary")]
        assert summary["run"] == "after" and summary["spectra"] == 80
        # a retained status is what a late subscriber sees first
        late = Listener(broker.port, "lab1")
        assert await asyncio.to_thread(
            _wait, lambda: any(t.endswith("/status") and r for t, _, r in late.messages), 10
        )
        late.stop()
    finally:
        if listener is not None:
            listener.stop()
        broker.kill()
