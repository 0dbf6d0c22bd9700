"""The results socket: every answer stamped, encoded and sent on ZeroMQ, under the socket's own lock.

`Publisher.publish` is the one exit of every MS2 answer (scored, shed, invalid),
called from the engine workers and the event loop: it stamps each result
(``sent_ns`` echoed, ``received_ns``, ``published_ns``), sends it on the bound PUB
socket (sends never wait: PUB drops only for a subscriber past its high-water
mark) and reports what it sent (`Published`): the stats for the metrics, the
answers per run for the run book, the identified ones for MQTT. The latency clock is
read after the last send, so no result's latency is under-reported.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from rtsearch.matches import ResultMessage
from rtsearch.serve.jobs import RunState, Stamp
from rtsearch.serve.stats import Answered, RunAnswered
from rtsearch.types import ResultStatus
from rtsearch.wire import RESULT, result_body

_MORE, _LAST = int(zmq.SNDMORE | zmq.NOBLOCK), int(zmq.NOBLOCK)
IDENTIFIED = ResultStatus.IDENTIFIED.value


class ZmqResults:
    """The bound PUB socket results go out on (a plain socket: sends never wait)."""

    def __init__(self, ctx: zmq.Context[Any], endpoint: str, *, hwm: int = 1_000_000) -> None:
        self.socket = ctx.socket(zmq.PUB)
        self.socket.setsockopt(zmq.SNDHWM, hwm)
        self.socket.setsockopt(zmq.LINGER, 1000)
        self.socket.bind(endpoint)
        self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._send = self.socket.send

    def send_result(self, body: bytes) -> None:
        """One result message: the topic frame, then ``body`` (`rtsearch.wire.result_body`)."""
        self._send(RESULT, _MORE)
        self._send(body, _LAST)

    def close(self) -> None:
        self.socket.close()


@dataclass
class Published:
    """What one `Publisher.publish` call sent."""

    stats: Answered
    per_run: list[tuple[RunState, int]]  # answers per run (segment)
    psms: list[tuple[str, bytes]]  # identified results: run, encoded body (for MQTT)


class Publisher:
    """Stamps and sends results on a `ZmqResults` socket; see the module docstring."""

    def __init__(self, ctx: zmq.Context[Any], endpoint: str, *, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._zmq = ZmqResults(ctx, endpoint)
        self.endpoint = self._zmq.endpoint
        self.clock = clock
        self._lock = threading.Lock()  # the socket's: ZeroMQ sockets are not thread-safe
        self._closed = False

    def publish(self, results: Sequence[ResultMessage], stamps: Sequence[Stamp]) -> Published | None:
        """Stamp and send ``results`` (one per stamp); ``None`` when the socket is closed already."""
        n = len(results)
        received = np.fromiter((s.received_mono for s in stamps), dtype=np.int64, count=n)
        budget = np.fromiter((s.budget_ns for s in stamps), dtype=np.int64, count=n)
        wall = time.time_ns
        psms: list[tuple[str, bytes]] = []
        by_status: dict[str, int] = {}
        per_run: dict[int, list[Any]] = {}  # id(state) -> [state, results, identified]
        with self._lock:
            if self._closed:
                return None
            send = self._zmq.send_result
            for res, st in zip(results, stamps, strict=True):
                res["sent_ns"], res["received_ns"], res["published_ns"] = st.sent_ns, st.received_ns, wall()
                body = result_body(res)
                send(body)
                status = res["status"]
                by_status[status] = by_status.get(status, 0) + 1
                counts = per_run.get(id(st.state))
                if counts is None:
                    counts = per_run[id(st.state)] = [st.state, 0, 0]
                counts[1] += 1
                if status == IDENTIFIED:
                    psms.append((res["run"], body))
                    counts[2] += 1
        elapsed = self.clock() - received
        runs = [RunAnswered(state.name, k, ident, state.threshold) for state, k, ident in per_run.values()]
        stats = Answered(elapsed / 1e9, int(np.count_nonzero(elapsed > budget)), by_status, runs)
        return Published(stats, [(state, k) for state, k, _ in per_run.values()], psms)

    def close(self) -> None:
        """Close the socket; later `publish` calls send nothing."""
        with self._lock:
            self._closed = True
            self._zmq.close()
