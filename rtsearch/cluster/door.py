"""The front door's side of a cluster: a `Scorer` that spreads batches over remote workers and gets them back.

`ClusterScorer.score` is what each of the daemon's engine threads calls instead of scoring itself (thread-safe;
it blocks until the batch's answers are in). A dispatcher thread owns the sockets (`rtsearch.cluster.worker`
draws the wire) and, each turn of its loop: takes the batches handed to it, the workers' answers and
heartbeats; calls a worker dead when its placement saw its process end, or when it was silent for `DEAD_AFTER_S`
(a remote or Ray worker: seconds, not one late beat of a busy host), and sends its batches in flight again; sends
each waiting batch to a worker:

- ``replicate``: every worker holds the whole target; a batch goes whole to the worker its engine thread keeps to
  (``score(worker=)``: `rtsearch.serve.engine.pacing`'s lanes) while that one lives, else to the live worker with the
  fewest spectra outstanding (ties: the fastest, by its measured seconds per spectrum);
- ``partition``: the precursor-mass range is cut by Li et al.'s equal-work rule (`rtsearch.cluster.partition`;
  `LiveCuts`: cut again as the spectra come), each piece's slice held by ``[serve] piece_workers`` workers (worker k:
  piece k mod pieces); a spectrum goes whole to an owner of its mass (lane j of lanes sharing the workers: copy j mod
  piece_workers, as a replicate lane keeps to its worker; else the least held), which answers it, or — when a query
  lies beyond that slice — each query to an owner of its mass, and the door chooses the spectrum's best over them
  (`rtsearch.cluster.pieces`). A piece whose owners are dead waits for a restarted one `FAILOVER_S` (or half the
  budget), then goes to a live worker whose slice covers it, if any (any, when each holds the whole target).

Lanes may share one cluster (`rtsearch.cluster.share`): then each lane's door binds where the lanes' front said, and
only lane 0's starts and restarts the workers. A batch no live worker answers within ``timeout_s`` (the daemon's
budget) raises `EngineError` (the daemon answers its spectra with the reason: nothing is lost); a late answer to a
batch given up or sent again is dropped (one answer a spectrum).

What peers send is read as `rtsearch.cluster.frames` says, never unpickled: a message that is not that, or from a
name that is not one of this door's workers, is dropped and counted (`dropped`; each kind logged once), and the
dispatcher goes on. Off loopback its sockets take only its workers (CURVE, `rtsearch.cluster.auth`). Should its
dispatcher thread (or its ZAP handler's) stop all the same, `failed` says so — the daemon's supervisor then drops
readiness and stops (exit 1) — and every batch waiting on it, or asked of it later, raises `EngineError`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import zmq

from rtsearch.batch import SpectraBatch
from rtsearch.cluster import frames as wire
from rtsearch.cluster.auth import DoorKeys, identity, loopback, token
from rtsearch.cluster.pieces import Own, Pieces
from rtsearch.cluster.placement import Placement
from rtsearch.cluster.share import Share
from rtsearch.cluster.status import Cluster
from rtsearch.cluster.worker import BEAT_S, WorkerSpec
from rtsearch.errors import EndpointError, EngineError, ServiceError
from rtsearch.matches import ScoredBatch
from rtsearch.search.target import Reopen

log = logging.getLogger(__name__)


# a worker silent this long is dead: its batches go elsewhere. 25 beats: a host busy enough to hold a worker's beat
# thread off the CPU for a second (a 2-core machine with a CPU-bound process a core beside it) is not a death; a
# local worker's death is seen by its process's end within 0.1 s (`LocalPlacement.exited`)
DEAD_AFTER_S = 5.0
HANG_FACTOR, HANG_FLOOR_S, HANG_FIRST_S = 10.0, 1.0, 30.0  # a batch held longer than this is hung (`_hang_s`)
SLOWEST_DECAY = 0.9  # each answered batch not slower shrinks a worker's slowest time a spectrum by this
FAILOVER_S = 2.0  # partition: a dead owner's spectra wait this long for it, then go to any live worker
START_TIMEOUT_S = 600.0  # every worker opened its target and said hello (a large index on a fresh machine)
SHARED_STOP_S = 60.0  # shared workers: how long the lane that started them waits for the other lanes to be done
BEAT_MAX_BYTES = 1024  # a heartbeat message's frames at most (a name and 8 bytes): a larger one ends its connection

Answer = tuple[list[bytes], float, float, float]  # a reply's frames (`wire.read_reply`); seconds queued, scored, share


@dataclass
class _Worker:
    name: str
    piece: int
    copy: int = 0  # partition: which of its piece's `piece_workers` workers it is (worker k: k // pieces)
    pid: int = 0
    alive: bool = False
    last_beat: float = 0.0
    outstanding: int = 0  # spectra sent and not answered
    seconds_per_spectrum: float = 0.0  # measured, smoothed
    slowest: float = 0.0  # seconds a spectrum of its slowest recent batch (top-down varies 10x; `SLOWEST_DECAY`)
    inflight: set[int] = field(default_factory=set)
    busy_s: float = 0.0  # how long its batch in hand has taken, as its last heartbeat said
    hung: bool = False  # called hung: out until a heartbeat says it is idle again
    batches: int = 0
    spectra: int = 0
    scoring_s: float = 0.0  # seconds spent scoring, as its answers said
    since_up: int = 0  # spectra answered since its last hello (a restarted worker's own)


@dataclass
class _Request:
    id: int
    size: int  # spectra
    payload: list[wire.Frame]  # (`SpectraBatch`, its queries' mass range or None: all, best chosen by the worker)
    piece: int  # -1: any worker
    own: Own | None  # partition: the masses it needs scored (who else can stand in for its piece's worker)
    future: concurrent.futures.Future[Answer]
    first: float
    prefer: int = -1  # replicate: the worker asked for; partition: its piece's copy (-1: any)
    worker: str = ""
    sent: float = 0.0
    whole: bool = True  # its spectra answered (a `ScoredBatch` back), else their queries in ``own`` (`QueryScores`)


class ClusterScorer:
    """``with ClusterScorer(reopen, placement, workers=3) as cluster: cluster.score(b)`` (replicate), or with
    ``pieces=`` a `Pieces` of 3 (partition) — see the module docstring."""

    def __init__(self, reopen: Reopen, placement: Placement, *, workers: int, pieces: Pieces | None = None,
                 host: str = "127.0.0.1", timeout_s: float = 30.0, record: Callable[..., None] = lambda _: None,
                 share: Share | None = None, curve: bool = False) -> None:  # fmt: skip
        """``record``: the daemon's metrics' (`Cluster` stats, from the dispatcher thread); ``share``: this door is
        a lane's of lanes sharing the workers (`rtsearch.cluster.share`: its endpoints there, `ipc://` in a folder of
        the daemon's user; the keeper's starts them); ``curve``: CURVE on loopback too (off loopback it always is:
        `rtsearch.cluster.auth`)."""
        if pieces is not None and workers % len(pieces.reopens):
            raise ValueError("partition needs the same number of workers for each piece")
        self.reopen, self.placement, self.pieces = reopen, placement, pieces
        self.mode = "replicate" if pieces is None else "partition"
        self.timeout_s, self.record, self.share = timeout_s, record, share
        n = len(pieces.reopens) if pieces else workers
        self.workers = {f"w{k}": _Worker(f"w{k}", k % n if pieces else -1, k // n) for k in range(workers)}
        self._token = "" if share else token()  # in the workers' identities (shared: ipc in a private folder)
        self._identity = {name: identity(name, self._token) for name in self.workers}
        self._by_identity = {self._identity[name]: w for name, w in self.workers.items()}
        self._copy = share.index % (workers // n) if share else -1  # lanes sharing: the copies this lane's go to
        self.curve = share is None and (curve or not loopback(host))  # shared: ipc endpoints (`Share.check`)
        self.dropped = 0  # messages from peers dropped: not the wire, or not from one of this door's workers
        self._told: set[str] = set()  # the kinds of dropped message logged (once each)
        self._ctx = zmq.Context()
        self._keys: DoorKeys | None = None
        self._router = self._ctx.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a restarted worker takes its name back
        self._router.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a send to a worker that is not there raises
        self._router.setsockopt(zmq.LINGER, 0)
        self._beats = self._ctx.socket(zmq.PULL)
        self._beats.setsockopt(zmq.LINGER, 0)
        self._beats.setsockopt(zmq.MAXMSGSIZE, BEAT_MAX_BYTES)
        try:
            if share is not None:
                share.check()
            if self.curve:  # before they bind: no peer is ever let in without the workers' key
                self._keys = DoorKeys(self._ctx)
                self._keys.server(self._router)
                self._keys.server(self._beats)
            ends = share.door(share.index) if share else None
            self.router = _bind(self._router, host, ends[0] if ends else "")
            self.beats = _bind(self._beats, host, ends[1] if ends else "")
        except EndpointError:
            if self._keys is not None:
                self._keys.close()
            self._ctx.destroy(linger=0)
            raise
        self._submit_at = f"inproc://cluster-submit-{id(self)}"
        self._submit = self._ctx.socket(zmq.PULL)
        self._submit.bind(self._submit_at)
        self._local = threading.local()
        self._ids = itertools.count(1)
        self._requests: dict[int, _Request] = {}
        self._lock = threading.Lock()
        self._waiting: collections.deque[int] = collections.deque()
        self._stop = threading.Event()
        self._all_ready = threading.Event()
        self._thread = threading.Thread(target=self._dispatch, name="cluster-door", daemon=True)
        self._failure = ""  # why the dispatcher thread stopped on its own ("": it runs, or was stopped)
        self.resent = 0  # batches sent again after their worker died
        self.deaths = 0

    def __enter__(self) -> ClusterScorer:
        router, beats = self.router, self.beats
        others: tuple[tuple[str, str], ...] = ()
        if self.share is not None:  # the keeper's door first: the one whose placement restarts them
            (router, beats), *rest = self.share.doors
            others = tuple(rest)
        keys = self._keys.worker if self._keys is not None else None
        specs = [WorkerSpec(w.name, w.piece, self.pieces.reopens[w.piece] if self.pieces else self.reopen, router,
                            beats, others=others, keys=keys, token=self._token)
                 for w in self.workers.values()]  # fmt: skip
        self._thread.start()
        if self.share is None or self.share.keeper:
            self.placement.start(specs)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._all_ready.wait(0.1):
            if self.failed() or time.monotonic() > deadline:
                self.__exit__()
                raise ServiceError(f"cluster: {self._failure}" if self._failure else
                                   f"cluster: not every worker was up within {START_TIMEOUT_S:.0f} s")  # fmt: skip
        return self

    def __exit__(self, *exc: Any) -> None:
        for w in self.workers.values():
            log.info("cluster: %s (piece %d, pid %d): %d spectra since it came up, %d in all; %d deaths, %d batches "
                     "sent again", w.name, w.piece, w.pid, w.since_up, w.spectra, self.deaths, self.resent)  # fmt: skip
        if self.dropped or self.refused:
            log.warning("cluster: %d messages from peers dropped, %d peers refused at the door", self.dropped,
                        self.refused)  # fmt: skip
        for w in self.workers.values():
            if w.alive:
                self._send(w.name, [b"stop"])
        if self.share is not None and self.share.keeper:  # the other lanes may still be answering through them
            deadline = time.monotonic() + SHARED_STOP_S
            while time.monotonic() < deadline and any(time.monotonic() - w.last_beat < 3 * BEAT_S and w.alive
                                                      for w in self.workers.values()):  # fmt: skip
                time.sleep(BEAT_S)
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        if self.share is None or self.share.keeper:
            self.placement.close()
        if self._keys is not None:
            self._keys.close()
        self._ctx.destroy(linger=0)  # the engine threads' submit sockets too

    @property
    def refused(self) -> int:
        """Peers refused at the handshake: without the workers' key (CURVE only)."""
        return self._keys.refused if self._keys is not None else 0

    def failed(self) -> int:
        """Threads of the door that stopped on their own (the dispatcher, the ZAP handler): 0 while they run, before
        it started, or once it was closed (`rtsearch.serve.engine.workers.WorkerPool.failed` counts them)."""
        if self._stop.is_set() or self._thread.ident is None:
            return 0
        return int(not self._thread.is_alive()) + int(self._keys is not None and not self._keys.alive())

    def alive(self) -> bool:
        """Whether the door serves (its threads run)."""
        return self._thread.is_alive() and not self.failed()

    # ------------------------------------------------------------------ engine threads' side

    def score(self, batch: SpectraBatch, *, worker: int = -1) -> ScoredBatch:
        """``batch`` scored by the cluster (raises `EngineError` when no worker answered it in time); replicate:
        by ``worker`` (its number) while it lives, else by the live one with the fewest spectra outstanding."""
        if self.pieces is None:
            return self._wait([self._request(batch, -1, None, prefer=worker)])[0]
        plan, c = self.pieces.route(batch), self._copy
        answers = self._wait([self._request(batch.take(p.rows), p.piece, p.own, whole=p.whole, prefer=c) for p in plan])
        return self.pieces.finish(batch, list(zip(plan, answers, strict=True)))

    def _request(self, batch: SpectraBatch, piece: int, own: Own | None, *, whole: bool = True, prefer: int = -1
                 ) -> _Request:  # fmt: skip
        """``whole``: the spectra answered (the worker is sent no mass range); else their queries in ``own``."""
        # encoded here, in the calling engine thread, not in the dispatcher (one thread for all workers)
        sent = wire.batch_frames(batch, None if whole else own)
        req = _Request(next(self._ids), len(batch), sent, piece, own, concurrent.futures.Future(), time.monotonic(),
                       prefer=prefer, whole=whole)  # fmt: skip
        with self._lock:
            if self._failure:  # no dispatcher to take it
                raise EngineError(f"cluster: {self._failure}")
            self._requests[req.id] = req
        sock = getattr(self._local, "push", None)
        if sock is None:
            sock = self._local.push = self._ctx.socket(zmq.PUSH)
            sock.connect(self._submit_at)
        sock.send(req.id.to_bytes(8, "little"))
        return req

    def _wait(self, requests: list[_Request]) -> list[Any]:
        """The answers (`ScoredBatch`, or a partition worker's `QueryScores`), decoded here (an engine thread); a
        worker's failure, or an answer that is not one to its request, raises `EngineError`. A `ScoredBatch`'s
        ``stages``: ``queued``, the seconds it waited at its worker behind an earlier batch, ``scoring``, the
        worker's own seconds on it (the daemon tells its workers' time from its own with them:
        `rtsearch.serve.engine.pacing`), and ``share``, its spectra's part of that when the worker scored it with
        others as one batch (what it cost: `rtsearch.cluster.cost`)."""
        out = []
        for req in requests:
            answer, queued, scoring, share = req.future.result()
            try:
                kind, payload = wire.read_reply(answer)
            except wire.FrameError as e:
                self._drop("reply", f"an answer from {req.worker} not the wire's ({e})")
                raise EngineError(f"cluster: {req.worker}'s answer could not be read: {e}") from None
            if kind == "error":
                raise EngineError(payload)
            size = len(payload) if isinstance(payload, ScoredBatch) else len(payload.reason)  # type: ignore[union-attr]
            if kind != ("scored" if req.whole else "queries") or size != req.size:
                self._drop("reply", f"an answer from {req.worker} to another request ({kind} of {size} spectra)")
                raise EngineError(f"cluster: {req.worker} answered {kind} of {size} spectra, asked {req.size}")
            if isinstance(payload, ScoredBatch):
                payload.stages.update(queued=queued, scoring=scoring, share=share)
            out.append(payload)
        return out

    # ------------------------------------------------------------------ the dispatcher thread

    def _dispatch(self) -> None:
        """The dispatcher thread: `_serve` until stopped; if it stops on its own, every batch waiting on it fails
        (`EngineError`: the daemon answers their spectra) and `failed` says so."""
        try:
            self._serve()
        except BaseException as e:  # noqa: BLE001  # any end that was not asked for: said, not silent
            log.exception("cluster: the door's dispatcher thread stopped")
            with self._lock:
                self._failure = f"the door's dispatcher thread stopped ({type(e).__name__}: {e})"
                left, self._requests = list(self._requests.values()), {}
            for req in left:
                if not req.future.done():
                    req.future.set_exception(EngineError(f"cluster: {self._failure}"))

    def _serve(self) -> None:
        poller = zmq.Poller()
        for s in (self._router, self._beats, self._submit):
            poller.register(s, zmq.POLLIN)
        while not self._stop.is_set():
            ready = dict(poller.poll(20))
            now = time.monotonic()
            while self._submit in ready and self._submit.poll(0):
                self._waiting.append(int.from_bytes(self._submit.recv(), "little"))
            while self._beats in ready and self._beats.poll(0):
                self._guarded("heartbeat", self._beat, self._beats.recv_multipart(), now)
            while self._router in ready and self._router.poll(0):
                self._guarded("message", self._from_worker, self._router.recv_multipart(), now)
            self._check(now)
            self._send_waiting(now)

    def _guarded(self, what: str, handle: Callable[[list[bytes], float], None], frames: list[bytes], now: float
                 ) -> None:  # fmt: skip
        """``handle(frames, now)``; a message it cannot read is dropped (`FrameError`), and one it fails on besides
        too, logged: the dispatcher goes on either way."""
        try:
            handle(frames, now)
        except wire.FrameError as e:
            self._drop(what, f"a {what} not the wire's ({e})")
        except Exception as e:  # (a bug of ours): the message, not the dispatcher
            self._drop(f"{what} failing", f"a {what} the door failed on ({type(e).__name__}: {e})", trace=True)

    def _drop(self, kind: str, why: str, *, trace: bool = False) -> None:
        """A peer's message dropped: counted, and logged the first time of its ``kind`` (engine threads call it too,
        for an answer they cannot read)."""
        with self._lock:
            self.dropped += 1
            first = kind not in self._told
            self._told.add(kind)
        if first:
            log.warning("cluster: dropped %s; such messages are counted, not logged again", why, exc_info=trace)

    def _beat(self, frames: list[bytes], now: float) -> None:
        ident, busy_ns = wire.read_beat(frames)
        w = self._by_identity.get(ident)
        if w is None:
            self._drop("name", f"a heartbeat from {ident[:40]!r}, not one of this door's workers")
            return
        if w.pid and w.pid not in self.placement.exited():  # called dead and beating (idle, if hung): back (an
            # ended process's successor beating before its hello is not: its hello brings it back)
            w.busy_s = busy_ns / 1e9
            w.hung = w.hung and w.busy_s > 0
            w.alive, w.last_beat = w.alive or not w.hung, now

    def _from_worker(self, frames: list[bytes], now: float) -> None:
        w = self._by_identity.get(frames[0])
        if w is None:
            self._drop("name", f"a message from {frames[0][:40]!r}, not one of this door's workers")
            return
        verb = frames[1] if len(frames) > 1 else b""
        if verb == b"hello" and len(frames) == 3:
            self._hello(w, wire.read_hello(frames[2]), now)
            return
        if verb != b"scored" or len(frames) < 5 or len(frames[2]) != 8:
            raise wire.FrameError(f"{verb[:16]!r} of {len(frames) - 1} frames from {w.name}")
        took_ns, waited_ns, share_ns = wire.read_times(frames[3])
        rid = int.from_bytes(frames[2], "little")
        with self._lock:
            req = self._requests.get(rid)
        if req is None or req.worker != w.name:  # answered already (sent again after this worker was called dead)
            return
        w.inflight.discard(rid)
        w.outstanding -= req.size
        w.last_beat = now
        took = (now - req.sent) / max(req.size, 1)
        w.seconds_per_spectrum = took if w.batches == 0 else 0.8 * w.seconds_per_spectrum + 0.2 * took
        w.slowest = max(took, SLOWEST_DECAY * w.slowest)  # an outlier (a batch queued behind others) fades
        # the worker's own account: its time on the round (its batch, or the merged one it was part of), how long
        # this one waited there before it, its part of that round
        scoring, queued, share = took_ns / 1e9, waited_ns / 1e9, share_ns / 1e9
        w.batches, w.spectra, w.since_up = w.batches + 1, w.spectra + req.size, w.since_up + req.size
        w.scoring_s += share
        rounds = share / scoring if scoring > 0 else 1.0  # its part of the round it was scored in (by spectra)
        self.record(Cluster(w.name, w.piece, up=True, spectra=req.size, busy_s=share, rounds=rounds, pid=w.pid))
        with self._lock:
            del self._requests[rid]
        req.future.set_result((frames[4:], queued, scoring, share))

    def _hello(self, w: _Worker, hello: wire.Hello, now: float) -> None:
        if hello.name != w.name or hello.piece != w.piece:
            raise wire.FrameError(f"a hello from {w.name} as {hello.name[:40]!r} of piece {hello.piece} "
                                  f"(it is piece {w.piece})")  # fmt: skip
        if w.pid and w.pid != hello.pid and w.alive:  # a new process before it was called dead
            self._died(w, f"back (pid {w.pid} -> {hello.pid})")  # (called dead already: that was its death)
        w.pid, w.alive, w.last_beat, w.since_up, w.slowest = hello.pid, True, now, 0, 0.0
        self.record(Cluster(w.name, w.piece, up=True, pid=w.pid))
        gpu = f" on GPU {hello.gpu}" if hello.gpu else ""
        log.info("cluster: %s up (pid %d, piece %d, %s%s; %d entries, %.3f GB on its device)", w.name, w.pid,
                 w.piece, hello.backend, gpu, hello.entries, hello.device_bytes / 1e9)  # fmt: skip
        if all(x.alive for x in self.workers.values()):
            self._all_ready.set()

    def _hang_s(self, w: _Worker) -> float:
        """How long a worker may hold a batch: `HANG_FACTOR` × its slowest measured time a spectrum × what it
        holds, at least `HANG_FLOOR_S` (`HANG_FIRST_S` before it answered anything)."""
        if not w.batches:
            return HANG_FIRST_S
        return max(HANG_FLOOR_S, HANG_FACTOR * max(w.slowest, w.seconds_per_spectrum) * max(w.outstanding, 1))

    def _check(self, now: float) -> None:
        self._give_up_late(now)
        exited = self.placement.exited()
        for w in self.workers.values():
            # a worker is called hung only where another live one could take its batches: the last one is slow, and
            # calling it hung would fail its batches (a dead one is still noticed by its silence)
            spare = any(x.alive for x in self.workers.values() if x is not w)
            if w.alive and w.inflight and spare and w.busy_s > self._hang_s(w):
                w.hung = True
                self._died(w, f"busy for {w.busy_s:.1f} s with {w.outstanding} spectra: hung")
            if w.alive and w.pid in exited:
                self._died(w, f"exited (pid {w.pid}): dead")
            elif w.alive and now - w.last_beat > DEAD_AFTER_S:
                self._died(w, f"silent for {now - w.last_beat:.1f} s: dead")

    def _give_up_late(self, now: float) -> None:
        """Batches a worker has held past ``timeout_s`` (the daemon's budget) since their engine thread asked: that
        thread gets `EngineError` now (the daemon answers their spectra ``shed``), the worker's late answer is
        dropped. Otherwise a worker slow or hung past the budget held its batches until it was called hung (a Ray
        worker restarted on a busy machine held its first for 30 s: answered after the client stopped waiting)."""
        for w in self.workers.values():
            for rid in list(w.inflight):
                with self._lock:
                    req = self._requests.get(rid)
                    if req is None or now - req.first <= self.timeout_s:
                        continue
                    del self._requests[rid]
                w.inflight.discard(rid)
                w.outstanding -= req.size
                req.future.set_exception(EngineError(f"no live cluster worker answered it within {self.timeout_s:g} s "
                                                    f"({w.name} held it)"))  # fmt: skip

    def _died(self, w: _Worker, why: str) -> None:
        """``w`` called dead (or hung): its batches in flight sent again; one death in the metrics — of lanes
        sharing the workers, the keeper's door's (every door sends its own batches again)."""
        w.alive = False
        self.deaths += 1
        log.warning("cluster: %s %s; %d batches sent again", w.name, why, len(w.inflight))
        self.record(Cluster(w.name, w.piece, up=False, pid=w.pid, died=self.share is None or self.share.keeper,
                            resent=len(w.inflight)))  # fmt: skip
        self._requeue(w)

    def _requeue(self, w: _Worker) -> None:
        """``w``'s batches in flight to be sent again, first in line (their answers from it, if any, dropped)."""
        for rid in sorted(w.inflight, reverse=True):
            with self._lock:
                req = self._requests.get(rid)
            if req is not None:
                req.worker = ""
                self._waiting.appendleft(rid)
                self.resent += 1
        w.inflight.clear()
        w.outstanding = 0

    def _send_waiting(self, now: float) -> None:
        kept: collections.deque[int] = collections.deque()
        while self._waiting:
            rid = self._waiting.popleft()
            with self._lock:
                req = self._requests.get(rid)
            if req is None:
                continue
            w = None if now - req.first > self.timeout_s else self._choose(req, now)  # (past it: not sent again)
            if w is None:
                if now - req.first > self.timeout_s:
                    with self._lock:
                        self._requests.pop(rid, None)
                    req.future.set_exception(EngineError(f"no live cluster worker took it within {self.timeout_s:g} s"))
                else:
                    kept.append(rid)
                continue
            req.worker, req.sent = w.name, now
            if not self._send(w.name, [b"batch", rid.to_bytes(8, "little"), *req.payload]):
                req.worker = ""
                kept.append(rid)
                continue
            w.inflight.add(rid)
            w.outstanding += req.size
        self._waiting = kept

    def _choose(self, req: _Request, now: float) -> _Worker | None:
        live = [w for w in self.workers.values() if w.alive]
        if req.piece >= 0:
            if owners := [w for w in live if w.piece == req.piece]:  # `piece_workers` of them: the lane's copy,
                kept = [w for w in owners if w.copy == req.prefer]  # else the least held
                return kept[0] if kept else min(owners, key=lambda w: (w.outstanding, w.seconds_per_spectrum))
            if now - req.first < min(FAILOVER_S, self.timeout_s / 2):
                return None
            assert self.pieces is not None and req.own is not None
            own = req.own
            live = [w for w in live if self.pieces.covers(w.piece, own)]
        if not live:
            return None
        asked = self.workers.get(f"w{req.prefer}")
        if asked is not None and asked.alive:
            return asked
        return min(live, key=lambda w: (w.outstanding, w.seconds_per_spectrum))

    def _send(self, name: str, frames: list[bytes | memoryview]) -> bool:
        try:
            self._router.send_multipart([self._identity[name], *frames], zmq.NOBLOCK)
            return True
        except zmq.ZMQError:  # not connected (dead, or not yet back)
            return False

    def status(self) -> list[dict[str, Any]]:
        """Each worker: name, piece, alive, pid, batches and spectra answered, seconds spent scoring, seconds per
        spectrum."""
        return [{"name": w.name, "piece": w.piece, "alive": w.alive, "pid": w.pid, "batches": w.batches,
                 "spectra": w.spectra, "since_up": w.since_up, "scoring_s": w.scoring_s,
                 "seconds_per_spectrum": w.seconds_per_spectrum}
                for w in self.workers.values()]  # fmt: skip


def _bind(sock: zmq.Socket[bytes], host: str, at: str = "") -> str:
    """``sock`` bound at ``at``, else at a free port of ``host``; the endpoint."""
    try:
        if at:
            sock.bind(at)
            return at
        port = sock.bind_to_random_port(f"tcp://{host}")
    except zmq.ZMQError as e:
        where = f"the lanes' cluster endpoint {at}" if at else f"[serve] cluster_host {host!r}"
        raise EndpointError(f"{where}: cannot bind there ({e})") from None
    return f"tcp://{host}:{port}"
