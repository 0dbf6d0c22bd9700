"""The results socket: every answer handed to publisher processes, encoded there, sent on one PUB.

`Publisher.publish` is the daemon's exit of every MS2 answer (scored, shed, invalid), called from the
engine workers and the event loop with column-wise `Results` and their stamps (`Stamps`). Every
answer reaches the results PUB (bound at the configured endpoint, high-water mark 1,000,000 a
subscriber) through a ZeroMQ proxy in a thread of the daemon (C, no GIL) whose PULL is bound on an
``inproc://`` and an ``ipc://`` path (`inner`). With ``publishers`` = 0 (the default) `publish` builds,
stamps, encodes (orjson) and pushes each result message itself, under a lock; with ``publishers`` > 0
it hands the columns, round robin, to that many processes (`rtsearch.serve.outputs.publisher_process`) that
do this work: the ~5 µs of Python a result costs leaves the daemon's GIL. The intake processes push
the answers they give at the door (`rtsearch.serve.engine.admission`) to `inner` too.

It reports what it handed on (`Published`): the stats for the metrics (latency from receipt to the
hand-off to a publisher), the answers per run for the run book, and, when MQTT is on, the
identified ones encoded for it.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import zmq

from rtsearch.matches import STATUSES, Results, ScoredBatch, concat_batches
from rtsearch.serve.children.child import Child
from rtsearch.serve.children.framing import pack
from rtsearch.serve.children.proxy import Forwarder
from rtsearch.serve.engine.jobs import Jobs, RunState, Stamps
from rtsearch.serve.intake.chunks import MESSAGE
from rtsearch.serve.observe.stats import Answered, RunAnswered
from rtsearch.serve.outputs.publisher_process import STOP_KIND, send_results, serve, stamp
from rtsearch.types import ResultStatus

log = logging.getLogger(__name__)

IDENTIFIED = STATUSES.index("identified")
PIPE_BYTES = 4 << 20
START_S = 60.0  # a publisher process's start, forked by the fork server (which may be starting itself)
DRAIN_S = 0.5  # after the publishers stopped, how long the proxy may take to forward their last messages


Answer = tuple[RunState, Results, Stamps]  # one run's answers to a batch


def unscored(jobs: Jobs, status: ResultStatus, reason: str) -> list[Answer]:
    """Answers to ``jobs`` without scoring them (``shed``, or ``unidentified`` after an engine error), run by
    run, each recorded in its run under the run's lock."""
    answers: list[Answer] = []
    sp = jobs.spectra
    for state, rows in jobs.by_run():
        with state.lock:
            results = state.live.add_unscored(status, sp.scan[rows], sp.precursor_mz[rows], [reason] * len(rows),
                                              [sp.native_id[i] for i in rows.tolist()] if sp.native_id else [])
        answers.append((state, results, jobs.stamps.take(rows)))
    return answers


def scored_answers(batches: Sequence[tuple[Jobs, ScoredBatch]]) -> list[Answer]:
    """The answers to scored batches, run by run, each run's built under its lock (running q-values and all) in one
    call for all of ``batches`` — a run's call costs ~0.25 ms whatever its size, and four runs sharing each batch
    made that the results thread's limit (the since-deleted probe answers_probe.py; docs/history/RESULTS.md,
    2026-11-27): the results thread answers together what queued behind it."""
    by_run: dict[int, tuple[RunState, list[ScoredBatch], list[Stamps]]] = {}
    for jobs, scored in batches:
        groups = jobs.by_run()
        for state, rows in groups:
            _, parts, stamps = by_run.setdefault(id(state), (state, [], []))
            parts.append(scored if len(groups) == 1 else scored.take(rows))
            stamps.append(jobs.stamps if len(groups) == 1 else jobs.stamps.take(rows))
    answers: list[Answer] = []
    for state, parts, stamps in by_run.values():
        with state.lock:
            results = state.live.add_scored(parts[0] if len(parts) == 1 else concat_batches(parts))
            state.threshold = state.live.fdr.threshold()
        answers.append((state, results, stamps[0] if len(stamps) == 1 else Stamps.concat(stamps)))
    return answers


@dataclass
class Published:
    """What one `Publisher.publish` call handed on."""

    stats: Answered
    per_run: list[tuple[RunState, int]]  # answers per run (segment)
    psms: list[tuple[str, bytes]]  # identified results, encoded for MQTT (when asked for)


class Publisher:
    """The results PUB, its proxy and the publisher processes; see the module docstring."""

    def __init__(
        self, ctx: zmq.Context[Any], endpoint: str, *, publishers: int = 0, hwm: int = 1_000_000,
        clock: Callable[[], int] = time.monotonic_ns, inner: str | None = None,
    ) -> None:  # fmt: skip
        """``inner``: the ``ipc://`` endpoint others send answers to (default: a new temporary path)."""
        self.clock = clock
        self.encode_psms = False  # set when MQTT wants the identified ones
        self._pub = ctx.socket(zmq.PUB)
        self._pub.setsockopt(zmq.SNDHWM, hwm)
        self._pub.setsockopt(zmq.LINGER, 1000)
        self._pub.bind(endpoint)  # raises ZMQError when the endpoint cannot be used
        self.endpoint = self._pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self._lock = threading.Lock()  # the in-process PUSH, or the publishers' pipes and the round robin
        self._closed = False
        self._next = 0
        # every answer reaches the PUB through the proxy (C, no GIL), whoever sends it: this process, the
        # publisher processes, the intake processes answering at the door (`inner`)
        self._dir = None if inner else tempfile.mkdtemp(prefix="rtsearch-results-")  # (a lane's: the front's folder)
        self.inner = inner or f"ipc://{Path(str(self._dir)) / 'results'}"
        self._pull = ctx.socket(zmq.PULL)
        self._pull.setsockopt(zmq.RCVHWM, 0)
        self._pull.bind(self.inner)
        here = f"inproc://results-here-{id(self)}"
        self._pull.bind(here)
        self._proxy = Forwarder(ctx, self._pull, self._pub, name="results-proxy").start()
        self._push = ctx.socket(zmq.PUSH)  # this process's answers (publishers = 0), under the lock
        self._push.setsockopt(zmq.SNDHWM, 0)
        self._push.connect(here)
        self._children = [Child(f"publisher-{k}", serve, self.inner, fork=True, buffer_bytes=PIPE_BYTES).start()
                          for k in range(publishers)]  # fmt: skip
        for child in self._children:
            child.wait_ready(START_S)
        self._conns = [child.conn for child in self._children if child.conn is not None]
    def failed(self) -> int:
        """Publisher processes that ended while the daemon was publishing."""
        return 0 if self._closed else sum(not c.alive() for c in self._children)

    def publish(self, answers: Sequence[Answer]) -> Published | None:
        """Send ``answers`` (or hand them to a publisher process); ``None`` when closed already.

        The latency clock is read after the sends (or the hand-off), so no answer's latency is under-reported.
        """
        psms: list[tuple[str, bytes]] = []
        if not self._conns:
            if not self._send_here(answers, psms if self.encode_psms else None):
                return None
        else:
            payload = pack(MESSAGE, [pickle.dumps([(r, s.sent_ns, s.received_ns, s.batched) for _, r, s in answers],
                                                  protocol=pickle.HIGHEST_PROTOCOL)])  # fmt: skip
            with self._lock:
                if self._closed:
                    return None
                conn = self._conns[self._next]
                self._next = (self._next + 1) % len(self._conns)
                conn.sendall(payload)
        now = self.clock()
        by_status: dict[str, int] = {}
        runs, latency, missed, per_run = [], [], 0, []
        for state, results, stamps in answers:
            n = len(results)
            elapsed = now - stamps.received_mono
            latency.append(elapsed)
            missed += int(np.count_nonzero(elapsed > stamps.budget_ns))
            counts = results.counts()
            for status, k in counts.items():
                by_status[status] = by_status.get(status, 0) + k
            runs.append(RunAnswered(state.name, n, counts.get("identified", 0), state.threshold))
            per_run.append((state, n))
            if self.encode_psms and self._conns and counts.get("identified"):
                psms.extend(self._psm_bodies(results, stamps))
        lat = np.concatenate(latency) if latency else np.zeros(0, np.int64)
        return Published(Answered(lat / 1e9, missed, by_status, runs), per_run, psms)

    def _send_here(self, answers: Sequence[Answer], psms: list[tuple[str, bytes]] | None) -> bool:
        """Build, stamp, encode and send each answer in this thread (the identified ones' bodies also into
        ``psms`` when given); whether the socket was open."""
        with self._lock:
            if self._closed:
                return False
            for _, results, stamps in answers:
                send_results(self._push, results, stamps.sent_ns, stamps.received_ns, stamps.batched, psms)
        return True

    @staticmethod
    def _psm_bodies(results: Results, stamps: Stamps) -> list[tuple[str, bytes]]:
        """The identified answers as their result messages, for MQTT."""
        wall, out = time.time_ns(), []
        for msg, st, s, r in zip(results.messages(), results.status.tolist(), stamps.sent_ns.tolist(),
                                 stamps.received_ns.tolist(), strict=True):  # fmt: skip
            if st == IDENTIFIED:
                out.append((results.run, orjson.dumps(stamp(msg, s, r, wall), option=orjson.OPT_SERIALIZE_NUMPY)))
        return out

    def close(self, timeout_s: float = 10.0) -> None:
        """Let the publishers send what they were given, forward it, then close everything."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.sendall(pack(STOP_KIND))
            self._push.close(linger=-1)  # handed to the proxy's PULL (inproc: at once)
        deadline = time.monotonic() + timeout_s
        for child in self._children:
            if not child.join(max(0.0, deadline - time.monotonic())):
                log.warning("%s did not stop in time", child.name)
            child.stop(0.0)
        time.sleep(DRAIN_S if self._children else 0.05)  # the proxy forwards what was pushed last
        self._proxy.stop()
        self._pull.close(0)
        self._pub.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
