"""MQTT publishing (aiomqtt): identifications and run summaries, never stalling scoring.

Messages go into a bounded queue that a few publisher tasks drain; when the
queue is full or the broker is down they are dropped and counted, and the
connection is retried with exponential backoff. The status topic is retained:
``online`` while connected, ``offline`` as the last will (and on a clean shutdown).
Topics: ``rtsearch/<instrument>/<run>/psm`` (QoS 1), ``.../<run>/summary``, ``.../<run>/elution``,
``rtsearch/<instrument>/status``. `MqttOutput` is the daemon's output (`rtsearch.serve.outputs`) that feeds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rtsearch.config import mqtt_address
from rtsearch.protocol.topics import MQTT_ELUTION, MQTT_PSM, MQTT_ROOT, MQTT_STATUS, MQTT_SUMMARY
from rtsearch.serve.observe.stats import Mqtt
from rtsearch.serve.outputs import Output, OutputContext

if TYPE_CHECKING:
    from rtsearch.serve.outputs.publish import Answer, Published
    from rtsearch.serve.runs.finish import Finished

log = logging.getLogger(__name__)

_TOPIC_UNSAFE = re.compile(r"[/+#\s\x00]")
MAX_SEGMENT_BYTES = 128  # a topic level at most (MQTT allows 65,535 bytes for the whole topic)


def topic_segment(name: str) -> str:
    """``name`` made safe as one MQTT topic level (no ``/``, ``+``, ``#``), at most `MAX_SEGMENT_BYTES`.

    A longer name keeps its first bytes and ends in a hash of the whole, so two long names stay apart.
    """
    safe = _TOPIC_UNSAFE.sub("_", name) or "_"
    raw = safe.encode("utf-8", "replace")
    if len(raw) <= MAX_SEGMENT_BYTES:
        return safe
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return raw[: MAX_SEGMENT_BYTES - 13].decode("utf-8", "ignore") + "~" + digest


class MqttPublisher:
    """Bounded, reconnecting MQTT publishing; use as ``async with MqttPublisher(...) as m``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        instrument: str,
        queue_size: int = 10_000,
        on_drop: Callable[[int], None] = lambda n: None,
        on_connected: Callable[[bool], None] = lambda up: None,
        publishers: int = 8,
        max_backoff_s: float = 5.0,
    ) -> None:
        self.host, self.port = host, port
        self.base = f"{MQTT_ROOT}/{topic_segment(instrument)}"
        self.status_topic = f"{self.base}/{MQTT_STATUS}"
        self.queue: asyncio.Queue[tuple[str, bytes, int, bool]] = asyncio.Queue(queue_size)
        self.on_drop, self.on_connected = on_drop, on_connected
        self.publishers = publishers
        self.max_backoff_s = max_backoff_s
        self.connected = False
        self.dropped = 0
        self.connects = 0
        self._task: asyncio.Task[None] | None = None
        self._client: Any = None

    def _drop(self, n: int = 1) -> None:
        self.dropped += n
        self.on_drop(n)

    def offer(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> bool:
        """Queue a message without waiting; ``False`` (and counted) when it is dropped."""
        if not self.connected:
            self._drop()
            return False
        try:
            self.queue.put_nowait((topic, payload, qos, retain))
            return True
        except asyncio.QueueFull:
            self._drop()
            return False

    def psm(self, run: str, payload: bytes) -> bool:
        return self.offer(f"{self.base}/{topic_segment(run)}/{MQTT_PSM}", payload, qos=1)

    def elution(self, run: str, payload: bytes) -> bool:
        return self.offer(f"{self.base}/{topic_segment(run)}/{MQTT_ELUTION}", payload, qos=1)

    def summary(self, run: str, summary: dict[str, Any]) -> bool:
        return self.offer(f"{self.base}/{topic_segment(run)}/{MQTT_SUMMARY}", json.dumps(summary).encode(), qos=1)

    async def __aenter__(self) -> MqttPublisher:
        self.start()
        return self

    def start(self) -> None:
        """Start (or restart) the connection task."""
        self._task = asyncio.create_task(self._run(), name="mqtt")

    def running(self) -> bool:
        """Whether the connection task runs (it only ends when closed, or by a bug)."""
        return self._task is not None and not self._task.done()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def flush(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until queued messages are sent, while connected."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self.connected and (self.queue.qsize() or self.queue._unfinished_tasks):  # type: ignore[attr-defined]
                    await asyncio.sleep(0.01)

    async def close(self, timeout: float = 2.0) -> None:
        """Send what is queued (bounded by ``timeout``), publish ``offline``, disconnect."""
        if self._task is None:
            return
        await self.flush(timeout)
        client = self._client
        if client is not None and self.connected:
            with contextlib.suppress(Exception):
                await client.publish(self.status_topic, b"offline", qos=1, retain=True, timeout=timeout)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        left = self.queue.qsize()
        if left:
            self._drop(left)

    async def _run(self) -> None:
        import aiomqtt

        backoff = 0.1
        while True:
            try:
                will = aiomqtt.Will(self.status_topic, b"offline", qos=1, retain=True)
                async with aiomqtt.Client(self.host, self.port, will=will, keepalive=10, timeout=5) as client:
                    self._client = client
                    await client.publish(self.status_topic, b"online", qos=1, retain=True)
                    self._set_connected(True)
                    backoff = 0.1
                    async with asyncio.TaskGroup() as tg:
                        tg.create_task(self._watch(client))
                        for _ in range(self.publishers):
                            tg.create_task(self._publish(client))
            except* (aiomqtt.MqttError, OSError) as eg:
                log.warning("MQTT %s:%s: %s; retrying in %.1f s", self.host, self.port, eg.exceptions[0], backoff)
            except* Exception as eg:  # a bug here must not end MQTT for good: logged, then a new connection
                log.error("MQTT %s:%s: publisher failed; reconnecting in %.1f s", self.host, self.port, backoff,
                          exc_info=eg.exceptions[0])  # fmt: skip
            self._client = None
            self._set_connected(False)
            # what waited for a dead connection is dropped, not held: the queue stays bounded in time too
            stale = self.queue.qsize()
            while not self.queue.empty():
                self.queue.get_nowait()
                self.queue.task_done()
            if stale:
                self._drop(stale)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff_s)

    def _set_connected(self, up: bool) -> None:
        if up and not self.connected:
            self.connects += 1
        self.connected = up
        self.on_connected(up)

    async def _watch(self, client: Any) -> None:
        # iterating messages raises MqttError as soon as the connection drops
        async for _ in client.messages:
            pass

    async def _publish(self, client: Any) -> None:
        import aiomqtt

        while True:
            topic, payload, qos, retain = await self.queue.get()
            try:
                await client.publish(topic, payload, qos=qos, retain=retain, timeout=5)
            except (aiomqtt.MqttError, asyncio.CancelledError):
                self._drop()
                raise  # the connection is gone (or closing): `_run` reconnects
            except Exception as e:  # this message cannot be sent (paho refuses it): dropped, the rest goes on
                self._drop()
                log.warning("MQTT: message to %r dropped: %s: %s", topic[:80], type(e).__name__, e)
            finally:
                self.queue.task_done()


class MqttOutput(Output):
    """``[serve] mqtt``: identified answers, elution events and run summaries to the broker (`MqttPublisher`)."""

    name = "mqtt"
    wants_psms = True

    def __init__(self) -> None:
        self.mqtt: MqttPublisher | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self, ctx: OutputContext) -> None:
        host, port = mqtt_address(ctx.cfg.mqtt)
        record = ctx.record
        self._loop = ctx.loop
        self.mqtt = MqttPublisher(host, port, instrument=ctx.cfg.instrument, queue_size=ctx.cfg.mqtt_queue,
                                  on_drop=lambda n: record(Mqtt(dropped=n)),
                                  on_connected=lambda up: record(Mqtt(connected=up)))  # fmt: skip
        self.mqtt.start()

    def on_answers(self, answers: Sequence[Answer], published: Published) -> None:
        if published.psms and self._loop is not None:  # (the queue is the loop's)
            self._loop.call_soon_threadsafe(self._psms, published.psms)

    def _psms(self, psms: list[tuple[str, bytes]]) -> None:
        if self.mqtt is not None:
            for run, payload in psms:
                self.mqtt.psm(run, payload)

    def on_event(self, kind: str, run: str, body: bytes) -> None:
        if kind == MQTT_ELUTION and self.mqtt is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self.mqtt.elution, run, body)

    def on_run_finished(self, done: Finished) -> None:
        if self.mqtt is not None:
            self.mqtt.summary(done.summary.run, {**done.summary.as_dict(), "results_file": str(done.path)})

    def check(self) -> str | None:
        if self.mqtt is not None and not self.mqtt.running():
            log.error("the MQTT publisher stopped; restarting it")
            self.mqtt.start()
        return None

    async def drain(self, timeout_s: float) -> None:
        if self.mqtt is not None:
            await self.mqtt.flush(timeout_s)

    async def aclose(self) -> None:
        if self.mqtt is not None:
            await self.mqtt.close()
