"""A cluster worker: a target opened in its own process, scoring the batches the front door sends it.

The data path is ZeroMQ, not Ray (a Ray call costs about a millisecond, the order of a whole search): the worker's
DEALER connects to the front door's ROUTER (`rtsearch.cluster.door`) and its heartbeat PUSH to the door's PULL —
a DEALER and a PUSH a door, where lanes share the workers (`rtsearch.cluster.share`)::

    worker                                   front door
    DEALER  ── hello {name, piece, pid, …} ─▶ ROUTER     once, after the target is open and warmed up
            ◀── batch  id  (SpectraBatch, own) ── scored id  took-ns waited-ns share-ns  ("scored", ScoredBatch) |
            ("queries", QueryScores)
                | ("error", text) ──▶
            ◀── stop
    PUSH    ── name  busy-for-ns ──▶ PULL               every `BEAT_S`, from a thread of its own

The batches waiting when the worker turns to them (from every door) are scored as one (`answer`: up to
`MERGE_SPECTRA` spectra): ``took`` is that batch's time, ``waited`` the time this one waited for it to begin,
``share`` its spectra's part of ``took``. A worker ends when every door it serves said ``stop``.

Batches and answers are columns in explicit frames (`rtsearch.cluster.frames`: a JSON header and raw arrays, read
with every length checked; nothing is unpickled); off loopback each socket is a CURVE client of its door, with the
keys its spec brought (`rtsearch.cluster.auth`). A batch that cannot be read is answered with the error (its
spectra answered by the door with it), a message that is not the wire's dropped. A worker is placed and restarted by Ray
(`rtsearch.cluster.placement`) or as a local process; a restarted one says hello again under the same name and
piece, and the door sends it its piece's spectra again. A batch the target fails on is answered with the error
(the door answers its spectra with it: nothing lost). ``own`` None (replicate): the batch's best matches, named;
a mass range (partition, spectra split): the batch's queries of mass in it, scored (`rtsearch.cluster.pieces`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zmq

from rtsearch.batch import SpectraBatch
from rtsearch.cluster import frames as wire
from rtsearch.cluster.auth import WorkerKeys, identity
from rtsearch.cluster.share import Endpoints
from rtsearch.search.live import named
from rtsearch.search.target import Reopen

log = logging.getLogger(__name__)

BEAT_S = 0.2  # heartbeat period; the door calls a worker dead after `rtsearch.cluster.door.DEAD_AFTER_S` of silence
MERGE_SPECTRA = 8192  # spectra of the batches waiting scored as one at most (`answer`; one batch may be larger)


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs: its name (its ZeroMQ identity), its piece of the mass range (-1: any), how to
    open the target, and the endpoints of the front door that starts it (``router``, ``beats``) and of the other
    doors it serves (``others``: lanes sharing the workers, `rtsearch.cluster.share`); ``keys``: its door's CURVE
    keys (None: loopback or ipc, none), ``token``: its door's start's, in its identity (`rtsearch.cluster.auth`)."""

    name: str
    piece: int
    reopen: Reopen
    router: str
    beats: str
    warm_up: bool = True
    device: int = -1  # a local worker's GPU (CUDA_VISIBLE_DEVICES); -1: as inherited (Ray assigns its own)
    others: tuple[Endpoints, ...] = ()
    keys: WorkerKeys | None = None
    token: str = field(default="", repr=False)

    @property
    def doors(self) -> tuple[Endpoints, ...]:
        return ((self.router, self.beats), *self.others)

    @property
    def identity(self) -> bytes:
        """Its ZeroMQ identity at its doors, and its heartbeats' name."""
        return identity(self.name, self.token)


@dataclass
class Ask:
    """A batch one door sent: the door (its index in the spec's ``doors``), the request id, the spectra, their
    queries' mass range (None: answer them whole) and when it came (ns, monotonic)."""

    door: int
    req: bytes
    batch: SpectraBatch
    own: tuple[float, float] | None
    came: int


def run_worker(spec: WorkerSpec, stop: threading.Event | None = None) -> None:
    """The worker's loop (see the module docstring); returns when every door said stop or ``stop`` is set."""
    stop = stop or threading.Event()
    target = spec.reopen()
    if spec.warm_up:  # compile kernels before the first real batch (CuPy); NumPy's first pass is as fast
        warm = SpectraBatch.of(target.warm_up_spectra(8))
        target.score_queries(warm, (-np.inf, np.inf)) if spec.piece >= 0 else target.score(warm)  # type: ignore[attr-defined]
    ctx = zmq.Context()
    socks = []
    for router, _ in spec.doors:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, spec.identity)
        sock.setsockopt(zmq.LINGER, 0)
        if spec.keys is not None:
            spec.keys.client(sock)
        sock.connect(router)
        socks.append(sock)
    busy = [0]  # since when the current batch is being scored (ns, monotonic); 0: idle
    beat = threading.Thread(target=_beats, args=(ctx, spec, busy, stop), name="beats", daemon=True)
    beat.start()
    hello = wire.hello(wire.Hello(spec.name, spec.piece, os.getpid(), target.backend.name, int(target.entries),
                                  int(target.device_bytes()),
                                  os.environ.get("CUDA_VISIBLE_DEVICES", "")))  # a local worker's GPU  # fmt: skip
    for sock in socks:
        sock.send_multipart([b"hello", hello])
    poller = zmq.Poller()
    for sock in socks:
        poller.register(sock, zmq.POLLIN)
    stopped: set[int] = set()
    try:
        while not stop.is_set() and len(stopped) < len(socks):
            if not poller.poll(100):
                continue
            asks = _take(socks, stopped, spec.name)
            while asks:
                k = _round(asks)
                now, asks = asks[:k], asks[k:]
                busy[0] = start = time.monotonic_ns()
                replies = answer(target, now, spec.name)
                busy[0] = 0
                _send(socks, now, replies, start, time.monotonic_ns() - start)
    finally:
        stop.set()
        beat.join(1.0)
        for sock in socks:
            sock.close(0)
        ctx.term()


def _send(socks: list[zmq.Socket[bytes]], asks: list[Ask], replies: list[wire.Reply], start: int, took: int
          ) -> None:  # fmt: skip
    """Each reply to its door, with the times of the module docstring (ns)."""
    size = sum(len(a.batch) for a in asks)
    for a, reply in zip(asks, replies, strict=True):
        share = took * len(a.batch) // max(size, 1)  # its spectra's part of the merged batch's time
        times = wire.times_frame(took, max(start - a.came, 0), share)
        try:
            frames = wire.reply_frames(reply)
        except Exception as e:  # (an array the wire cannot hold): its spectra answered with the reason, not lost
            log.exception("a reply could not be encoded")
            frames = wire.reply_frames(("error", f"a reply could not be encoded: {type(e).__name__}: {e}"))
        socks[a.door].send_multipart([b"scored", a.req, times, *frames])


def _round(asks: list[Ask]) -> int:
    """How many of the first ``asks`` to score as one: up to `MERGE_SPECTRA` spectra, at least one batch."""
    k, n = 1, len(asks[0].batch)
    while k < len(asks) and n + len(asks[k].batch) <= MERGE_SPECTRA:
        n += len(asks[k].batch)
        k += 1
    return k


def _take(socks: list[zmq.Socket[bytes]], stopped: set[int], name: str) -> list[Ask]:
    """Every batch waiting at any door's socket (a door's ``stop`` noted in ``stopped``); one that cannot be read is
    answered with the reason, a message that is not the wire's dropped (logged)."""
    asks = []
    for k, sock in enumerate(socks):
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if frames == [b"stop"]:
                stopped.add(k)
                continue
            if len(frames) < 3 or frames[0] != b"batch" or len(frames[1]) != 8:
                log.warning("%s: dropped a message from its door that is not a batch (%r, %d frames)", name,
                            frames[0][:16], len(frames))  # fmt: skip
                continue
            try:
                batch, own = wire.read_batch(frames[2:])
            except wire.FrameError as e:  # its spectra answered with the reason (the door waits for them)
                log.warning("%s: a batch that could not be read: %s", name, e)
                sock.send_multipart([b"scored", frames[1], wire.times_frame(0, 0, 0),
                                     *wire.reply_frames(("error", f"{name}: a batch that could not be read: {e}"))])
                continue
            asks.append(Ask(k, frames[1], batch, own, time.monotonic_ns()))
    return asks


def answer(target: Any, asks: list[Ask], name: str) -> list[wire.Reply]:
    """Each ask's reply: ``("scored", ScoredBatch)`` for a batch answered whole, ``("queries", QueryScores)`` for
    one scored in its mass range, ``("error", why)``. The batches answered whole are scored as one (what several
    doors, or one door's batches queued behind each other, sent at once); one that fails is scored again alone,
    so that only its own spectra get the error."""
    replies: list[wire.Reply | None] = [None] * len(asks)
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


def _beats(ctx: zmq.Context[Any], spec: WorkerSpec, busy: list[int], stop: threading.Event) -> None:
    pushes = []
    for _, beats in spec.doors:  # a PUSH a door (one PUSH connected to several would deal the beats out among them)
        push = ctx.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.setsockopt(zmq.SNDHWM, 10)
        if spec.keys is not None:
            spec.keys.client(push)
        push.connect(beats)
        pushes.append(push)
    try:
        while not stop.wait(BEAT_S):
            took = time.monotonic_ns() - busy[0] if busy[0] else 0  # how long the batch in hand has taken
            for push in pushes:
                with contextlib.suppress(zmq.Again):  # the door is away: it will call us dead or hear the next one
                    push.send_multipart(wire.beat_frames(spec.identity, took), zmq.NOBLOCK)
    finally:
        for push in pushes:
            push.close(0)


def process_main(conn: Any, spec: WorkerSpec) -> None:
    """A local worker process's main (a `rtsearch.serve.children.child.Child` of
    `rtsearch.cluster.placement.LocalPlacement`'s; ``conn``, its channel, unused: it speaks with its door)."""
    from rtsearch.serve.children.runtime import gpu_of

    if spec.device >= 0:  # before CuPy is imported (the target's reopen)
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu_of(spec.device)
    run_worker(spec)
