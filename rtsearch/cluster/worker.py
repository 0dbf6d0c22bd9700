"""A cluster worker: a target opened in its own process, scoring the batches the front door sends it.

The data path is ZeroMQ, not Ray (a Ray call costs about a millisecond, the order of a whole search): the worker's
DEALER connects to the front door's ROUTER (`rtsearch.cluster.door`) and its heartbeat PUSH to the door's PULL —
a DEALER and a PUSH a door, where lanes share the workers (`rtsearch.cluster.share`)::

    worker                                   front door
    DEALER  ── hello {name, piece, pid, …} ─▶ ROUTER     once, after the target is open and warmed up
            ◀── batch  id  pickle((SpectraBatch, own))
            ── scored id  pickle(("scored", ScoredBatch) | ("queries", QueryScores) | ("error", text))
                took-ns  waited-ns  share-ns ──▶
    PUSH    ── beat  name  busy-for-ns ──▶ PULL         every `BEAT_S`, from a thread of its own

The worker's main thread only moves messages (a batch received and unpickled while the last one is scored); its
scoring threads (`scoring_threads`: one by default; more each on a CUDA stream of its own) each take the batches
waiting when it turns to them (from every door) and score them as one (`answer`: up to `MERGE_SPECTRA` spectra): ``took`` is that
round's time, ``waited`` the time this batch waited for it to begin, ``share`` its spectra's part of ``took``. A
worker ends when every door it serves said ``stop``, after answering what it holds.

Batches and answers are pickled columns (as between the daemon and its engine process): the endpoints are the
cluster's own, on a trusted network (loopback by default). A worker is placed and restarted by Ray
(`rtsearch.cluster.placement`) or as a local process; a restarted one says hello again under the same name and
piece, and the door sends it its piece's spectra again. A batch the target fails on is answered with the error
(the door answers its spectra with it: nothing lost). ``own`` None (replicate): the batch's best matches, named;
a mass range (partition, spectra split): the batch's queries of mass in it, scored (`rtsearch.cluster.pieces`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from rtsearch.batch import SpectraBatch
from rtsearch.cluster.share import Endpoints
from rtsearch.search.live import named
from rtsearch.search.target import Reopen

log = logging.getLogger(__name__)

BEAT_S = 0.2  # heartbeat period; the door calls a worker dead after `rtsearch.cluster.door.DEAD_AFTER_S` of silence
MERGE_SPECTRA = 8192  # spectra of the batches waiting scored as one at most (`answer`; one batch may be larger)
# scoring threads of a GPU worker (`scoring_threads`): two, each on its own stream, lost to one on 2x H200 at 200 Da
# (two lanes on one GPU 11,861 /s at p99 53.7 ms against 12,908 at 46.9; on two GPUs 16,523 against 23,293; same
# call, bench/RESULTS.md 2026-11-27 10:10): the rounds overlapping on a GPU each take longer, and the daemon's cost
# model a batch (which reads a round's time as the worker's) sheds early. One thread still has its batches received
# and unpickled by the main thread while it scores.
GPU_THREADS = 1


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs: its name (its ZeroMQ identity), its piece of the mass range (-1: any), how to
    open the target, and the endpoints of the front door that starts it (``router``, ``beats``) and of the other
    doors it serves (``others``: lanes sharing the workers, `rtsearch.cluster.share`)."""

    name: str
    piece: int
    reopen: Reopen
    router: str
    beats: str
    warm_up: bool = True
    device: int = -1  # a local worker's GPU (CUDA_VISIBLE_DEVICES); -1: as inherited (Ray assigns its own)
    others: tuple[Endpoints, ...] = ()

    @property
    def doors(self) -> tuple[Endpoints, ...]:
        return ((self.router, self.beats), *self.others)


@dataclass
class Ask:
    """A batch one door sent: the door (its index in the spec's ``doors``), the request id, the spectra, their
    queries' mass range (None: answer them whole) and when it came (ns, monotonic)."""

    door: int
    req: bytes
    batch: SpectraBatch
    own: tuple[float, float] | None
    came: int


def scoring_threads(backend: str) -> int:
    """How many threads of a worker score at once: ``RTSEARCH_WORKER_THREADS``, else `GPU_THREADS` on a GPU, one on
    NumPy (the cores are the daemon's too)."""
    from rtsearch.serve.runtime import env_number

    return int(env_number("RTSEARCH_WORKER_THREADS", GPU_THREADS if backend == "cupy" else 1, positive=True))


def run_worker(spec: WorkerSpec, stop: threading.Event | None = None, *, threads: int = 0) -> None:
    """The worker's loop (see the module docstring); returns when every door said stop or ``stop`` is set, after
    answering what it holds. ``threads``: scoring threads (0: `scoring_threads`)."""
    stop = stop or threading.Event()
    target = spec.reopen()
    if spec.warm_up:  # compile kernels before the first real batch (CuPy); NumPy's first pass is as fast
        warm = SpectraBatch.of(target.warm_up_spectra(8))
        target.score_queries(warm, (-np.inf, np.inf)) if spec.piece >= 0 else target.score(warm)  # type: ignore[attr-defined]
    ctx = zmq.Context()
    socks = []
    for router, _ in spec.doors:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, spec.name.encode())
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(router)
        socks.append(sock)
    replies = ctx.socket(zmq.PULL)  # the scoring threads' answers, sent on by this thread (a socket is one thread's)
    at = f"inproc://worker-replies-{id(replies)}"
    replies.bind(at)
    held = _Held()
    beat = threading.Thread(target=_beats, args=(ctx, spec, held, stop), name="beats", daemon=True)
    beat.start()
    scorers = [threading.Thread(target=_scorer, args=(target, held, ctx, at, spec.name),
                                name=f"score-{k}", daemon=True)
               for k in range(threads or scoring_threads(target.backend.name))]  # fmt: skip
    for t in scorers:
        t.start()
    hello = pickle.dumps({"name": spec.name, "piece": spec.piece, "pid": os.getpid(), "backend": target.backend.name,
                          "entries": target.entries, "device_bytes": target.device_bytes(), "threads": len(scorers),
                          "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", "")})  # a local worker's GPU  # fmt: skip
    for sock in socks:
        sock.send_multipart([b"hello", hello])
    poller = zmq.Poller()
    for sock in (*socks, replies):
        poller.register(sock, zmq.POLLIN)
    stopped: set[int] = set()
    try:
        while not stop.is_set() and len(stopped) < len(socks):
            if poller.poll(100):
                held.add(_take(socks, stopped))
                _forward(replies, socks)
    finally:
        held.close()  # the scoring threads answer what they hold, then end
        for t in scorers:
            while t.is_alive():
                t.join(0.05)
                _forward(replies, socks)
        _forward(replies, socks)
        stop.set()
        beat.join(1.0)
        for sock in (*socks, replies):
            sock.close(0)
        ctx.term()


class _Held:
    """The batches received and not yet answered: the main thread adds them, each scoring thread takes the ones
    waiting (`_round`) and notes since when it scores (the heartbeat's busy time: the oldest round in hand)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._asks: list[Ask] = []
        self._since: dict[int, int] = {}  # scoring thread -> when its round began (ns, monotonic)
        self._closed = False

    def add(self, asks: list[Ask]) -> None:
        if asks:
            with self._cv:
                self._asks.extend(asks)
                self._cv.notify()

    def take(self) -> list[Ask]:
        """The next round (empty: closed and nothing left); the calling thread counts busy from now."""
        with self._cv:
            self._since.pop(threading.get_ident(), None)
            while not self._asks and not self._closed:
                self._cv.wait()
            k = _round(self._asks) if self._asks else 0
            now, self._asks = self._asks[:k], self._asks[k:]
            if now:
                self._since[threading.get_ident()] = time.monotonic_ns()
            return now

    def busy_ns(self) -> int:
        """How long the oldest round in hand has been scored (0: idle)."""
        with self._cv:
            return time.monotonic_ns() - min(self._since.values()) if self._since else 0

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()


def _scorer(target: Any, held: _Held, ctx: zmq.Context[Any], replies: str, name: str) -> None:
    """A scoring thread: on its own CUDA stream, rounds taken from ``held`` scored (`answer`) and each reply sent
    to the main thread as [door, its frames]."""
    target.backend.bind_worker()
    out = ctx.socket(zmq.PUSH)
    out.setsockopt(zmq.LINGER, -1)
    out.connect(replies)
    try:
        while asks := held.take():
            start = time.monotonic_ns()
            answers = answer(target, asks, name)
            for door, frames in _replies(asks, answers, start, time.monotonic_ns() - start):
                out.send_multipart([door.to_bytes(2, "little"), *frames])
    finally:
        out.close()


def _forward(replies: zmq.Socket[bytes], socks: list[zmq.Socket[bytes]]) -> None:
    """The scoring threads' replies waiting, each to its door."""
    while True:
        try:
            door, *frames = replies.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        socks[int.from_bytes(door, "little")].send_multipart(frames)


def _replies(asks: list[Ask], replies: list[tuple[str, Any]], start: int, took: int
             ) -> list[tuple[int, list[bytes]]]:  # fmt: skip
    """Each reply's door and frames, with the times of the module docstring (ns)."""
    size = sum(len(a.batch) for a in asks)
    out = []
    for a, reply in zip(asks, replies, strict=True):
        share = took * len(a.batch) // max(size, 1)  # its spectra's part of the merged batch's time
        times = [t.to_bytes(8, "little") for t in (took, max(start - a.came, 0), share)]
        out.append((a.door, [b"scored", a.req, pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL), *times]))
    return out


def _round(asks: list[Ask]) -> int:
    """How many of the first ``asks`` to score as one: up to `MERGE_SPECTRA` spectra, at least one batch."""
    k, n = 1, len(asks[0].batch)
    while k < len(asks) and n + len(asks[k].batch) <= MERGE_SPECTRA:
        n += len(asks[k].batch)
        k += 1
    return k


def _take(socks: list[zmq.Socket[bytes]], stopped: set[int]) -> list[Ask]:
    """Every batch waiting at any door's socket (a door's ``stop`` noted in ``stopped``)."""
    asks = []
    for k, sock in enumerate(socks):
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if frames[0] == b"stop":
                stopped.add(k)
                continue
            batch, own = pickle.loads(frames[2])
            asks.append(Ask(k, frames[1], batch, own, time.monotonic_ns()))
    return asks


def answer(target: Any, asks: list[Ask], name: str) -> list[tuple[str, Any]]:
    """Each ask's reply: ``("scored", ScoredBatch)`` for a batch answered whole, ``("queries", QueryScores)`` for
    one scored in its mass range, ``("error", why)``. The batches answered whole are scored as one (what several
    doors, or one door's batches queued behind each other, sent at once); one that fails is scored again alone,
    so that only its own spectra get the error."""
    replies: list[tuple[str, Any] | None] = [None] * len(asks)
    whole = [i for i, a in enumerate(asks) if a.own is None]
    if len(whole) > 1:
        try:
            scored = named(target, target.score(SpectraBatch.concat([asks[i].batch for i in whole])))
            sizes = [len(asks[i].batch) for i in whole]
            for i, end, n in zip(whole, np.cumsum(sizes).tolist(), sizes, strict=True):
                replies[i] = ("scored", scored.take(np.arange(end - n, end)))
        except Exception:  # noqa: BLE001  # each scored alone below: the failure answers its own batch only
            log.warning("%s: a merged batch of %d failed; scoring its %d parts one by one", name,
                        sum(len(asks[i].batch) for i in whole), len(whole))  # fmt: skip
    for i, a in enumerate(asks):
        if replies[i] is not None:
            continue
        try:
            replies[i] = ("scored", named(target, target.score(a.batch))) if a.own is None else \
                ("queries", target.score_queries(a.batch, a.own))  # fmt: skip
        except Exception as e:  # answered by the door with this reason
            log.exception("%s: failed on a batch of %d spectra", name, len(a.batch))
            replies[i] = ("error", f"{name}: {type(e).__name__}: {e}")
    return replies  # type: ignore[return-value]  # every one filled


def _beats(ctx: zmq.Context[Any], spec: WorkerSpec, held: _Held, stop: threading.Event) -> None:
    pushes = []
    for _, beats in spec.doors:  # a PUSH a door (one PUSH connected to several would deal the beats out among them)
        push = ctx.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.setsockopt(zmq.SNDHWM, 10)
        push.connect(beats)
        pushes.append(push)
    try:
        while not stop.wait(BEAT_S):
            took = held.busy_ns()  # how long the oldest round in hand has taken
            for push in pushes:
                with contextlib.suppress(zmq.Again):  # the door is away: it will call us dead or hear the next one
                    push.send_multipart([spec.name.encode(), str(took).encode()], zmq.NOBLOCK)
    finally:
        for push in pushes:
            push.close(0)


def process_main(spec: WorkerSpec, parent: int) -> None:
    """A local worker process's main (`rtsearch.cluster.placement.LocalPlacement`): ends with its parent."""
    from rtsearch.serve.runtime import as_child, gpu_of

    if spec.device >= 0:  # before CuPy is imported (the target's reopen)
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu_of(spec.device)
    as_child(parent, spec.name, keep_sigterm=True)  # `LocalPlacement.close` terminates it
    run_worker(spec)
