"""A cluster worker: a target opened in its own process, scoring the batches the front door sends it.

The data path is ZeroMQ, not Ray (a Ray call costs about a millisecond, the order of a whole search): the worker's
DEALER connects to the front door's ROUTER (`rtsearch.cluster.door`) and its heartbeat PUSH to the door's PULL::

    worker                                   front door
    DEALER  ── hello {name, piece, pid, …} ─▶ ROUTER     once, after the target is open and warmed up
            ◀── batch  id  pickle((SpectraBatch, own))
            ── scored id  pickle(("scored", ScoredBatch) | ("queries", QueryScores) | ("error", text))  took-ns ──▶
    PUSH    ── beat  name  busy-for-ns ──▶ PULL         every `BEAT_S`, from a thread of its own

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
from rtsearch.search.live import named
from rtsearch.search.target import Reopen

log = logging.getLogger(__name__)

BEAT_S = 0.2  # heartbeat period; the door calls a worker dead after `rtsearch.cluster.door.DEAD_AFTER_S` of silence


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs: its name (its ZeroMQ identity), its piece of the mass range (-1: any), how to
    open the target, and the door's two endpoints."""

    name: str
    piece: int
    reopen: Reopen
    router: str
    beats: str
    warm_up: bool = True
    device: int = -1  # a local worker's GPU (CUDA_VISIBLE_DEVICES); -1: as inherited (Ray assigns its own)


def run_worker(spec: WorkerSpec, stop: threading.Event | None = None) -> None:
    """The worker's loop (see the module docstring); returns when the door says stop or ``stop`` is set."""
    stop = stop or threading.Event()
    target = spec.reopen()
    if spec.warm_up:  # compile kernels before the first real batch (CuPy); NumPy's first pass is as fast
        warm = SpectraBatch.of(target.warm_up_spectra(8))
        target.score_queries(warm, (-np.inf, np.inf)) if spec.piece >= 0 else target.score(warm)  # type: ignore[attr-defined]
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, spec.name.encode())
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(spec.router)
    busy = [0]  # since when the current batch is being scored (ns, monotonic); 0: idle
    beat = threading.Thread(target=_beats, args=(ctx, spec, busy, stop), name="beats", daemon=True)
    beat.start()
    hello = {"name": spec.name, "piece": spec.piece, "pid": os.getpid(), "backend": target.backend.name,
             "entries": target.entries, "device_bytes": target.device_bytes(),
             "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", "")}  # a local worker's GPU (`process_main`)  # fmt: skip
    sock.send_multipart([b"hello", pickle.dumps(hello)])
    dumps = pickle.dumps
    try:
        while not stop.is_set():
            if not sock.poll(100):
                continue
            frames = sock.recv_multipart()
            if frames[0] == b"stop":
                break
            req, (batch, own) = frames[1], pickle.loads(frames[2])
            busy[0] = time.monotonic_ns()
            try:
                if own is None:
                    reply: tuple[str, Any] = ("scored", named(target, target.score(batch)))
                else:
                    reply = ("queries", target.score_queries(batch, own))  # type: ignore[attr-defined]  # an index
            except Exception as e:  # answered by the door with this reason
                log.exception("%s: failed on a batch of %d spectra", spec.name, len(batch))
                reply = ("error", f"{spec.name}: {type(e).__name__}: {e}")
            took = time.monotonic_ns() - busy[0]  # the batch's scoring (the door's busy time a worker)
            busy[0] = 0
            sock.send_multipart([b"scored", req, dumps(reply, protocol=pickle.HIGHEST_PROTOCOL),
                                 took.to_bytes(8, "little")])  # fmt: skip
    finally:
        stop.set()
        beat.join(1.0)
        sock.close(0)
        ctx.term()


def _beats(ctx: zmq.Context[Any], spec: WorkerSpec, busy: list[int], stop: threading.Event) -> None:
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.setsockopt(zmq.SNDHWM, 10)
    push.connect(spec.beats)
    try:
        while not stop.wait(BEAT_S):
            with contextlib.suppress(zmq.Again):  # the door is away: it will call us dead or hear the next one
                took = time.monotonic_ns() - busy[0] if busy[0] else 0  # how long the batch in hand has taken
                push.send_multipart([spec.name.encode(), str(took).encode()], zmq.NOBLOCK)
    finally:
        push.close(0)


def process_main(spec: WorkerSpec, parent: int) -> None:
    """A local worker process's main (`rtsearch.cluster.placement.LocalPlacement`): ends with its parent."""
    from rtsearch.serve.runtime import as_child, gpu_of

    if spec.device >= 0:  # before CuPy is imported (the target's reopen)
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu_of(spec.device)
    as_child(parent, spec.name, keep_sigterm=True)  # `LocalPlacement.close` terminates it
    run_worker(spec)
