"""An engine process: one engine worker's scoring, in a process of its own, so the daemon's GIL is not its.

The engine's host side is Python and NumPy between kernel launches (~4 ms of CPU for a batch of 300 on an
H100, as much as its wall time). In the daemon's process it shares one GIL with the event loop and the
results thread; measured on the GPU machine, a thread holding the GIL half the time made a batch of 300
take 7.7 ms instead of 5.5 (the since-deleted probe `engine_probe.py --switch 0.0001 --hog 0.5`,
docs/history/RESULTS.md). Here the target is opened again (`SearchTarget.reopen`, on the daemon's backend) in a spawned
child, and the worker thread hands it each `SpectraBatch` over a pipe and waits, the GIL released, for the
`ScoredBatch`::

    engine thread ──SpectraBatch──▶ pipe ──▶ engine process: target.score, named ──ScoredBatch──▶ back

Both are columns; a batch's arrays go through shared memory beside the pipe (`rtsearch.serve.children.pipes.Channel`:
the pipe carries the pickle's head, one short write): a batch of 300 spectra is ~0.6 MB out, ~50 kB back, with
the matches' names (`rtsearch.search.live.named`: ProForma and proteins), worked out here rather than by the
daemon's results thread, which shares the daemon's GIL.
An exception in the child comes back as `EngineError` with its text (the batch is answered with it, as in a
thread); a child that dies raises `EngineGone`, and the worker thread stops (the daemon then shuts down,
answering what it holds). The child ends with the daemon, even a SIGKILLed one (`rtsearch.serve.children.child`).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from rtsearch.batch import SpectraBatch
from rtsearch.config import EngineHost
from rtsearch.config.environment import tuning
from rtsearch.errors import EngineError
from rtsearch.matches import ScoredBatch, Scorer
from rtsearch.search.live import named
from rtsearch.search.target import Reopen, SearchTarget
from rtsearch.serve.children.pipes import ChannelChild, serve_channel

log = logging.getLogger(__name__)

START_TIMEOUT_S = 600.0  # opening a large index on a fresh machine (and CuPy's first import) takes a while


class EngineGone(RuntimeError):
    """The engine process is gone (it died or was stopped)."""


class EngineProcess(ChannelChild):
    """``with EngineProcess(reopen, name) as engine: engine.score(batch)`` — see the module docstring."""

    def __init__(self, reopen: Reopen, name: str = "engine") -> None:
        super().__init__(name, serve, reopen, gone=EngineGone, timeout_s=START_TIMEOUT_S)

    def score(self, spectra: SpectraBatch) -> ScoredBatch:
        """``spectra`` scored in the engine process (raises `EngineError` or `EngineGone`)."""
        kind, payload = self.call(spectra)
        if kind == "error":
            raise EngineError(payload)
        if kind == "matches":  # the spectra's own columns were not sent back (`_reply`)
            best, reason, stages, names, lower = payload
            return ScoredBatch(list(spectra.run), spectra.scan, spectra.precursor_mz, spectra.rt, best, reason, stages,
                               names, spectra.native_id, lower)  # fmt: skip
        result: ScoredBatch = payload
        return result


def serve(conn: socket.socket, reopen: Reopen) -> None:
    """The process's main function: open the target, then score each batch it is sent until the socket closes."""
    target = reopen()

    def score(batch: SpectraBatch) -> tuple[str, Any]:
        try:
            return _reply(batch, score_named(target, batch))  # named here, not in the daemon
        except EngineError as e:  # answered by the daemon with this reason, as a thread's failure would be
            return "error", str(e)

    serve_channel(conn, score, target.backend.name.encode())


def _reply(batch: SpectraBatch, scored: ScoredBatch) -> tuple[str, Any]:
    """What goes back: the matches alone (``matches``) when ``scored`` carries ``batch``'s own columns, which the
    daemon holds (a lone spectrum's reply pickled in ~2/3 of the time: three arrays and two lists fewer), else the
    whole `ScoredBatch` (``scored``)."""
    if (scored.scan is batch.scan and scored.precursor_mz is batch.precursor_mz and scored.rt is batch.rt
            and scored.native_id is batch.native_id and scored.run == batch.run):  # fmt: skip
        return "matches", (scored.best, scored.reason, scored.stages, scored.names, scored.lower)
    return "scored", scored


def score_named(target: SearchTarget, batch: SpectraBatch) -> ScoredBatch:
    """``batch`` scored and its matches named by ``target`` (an engine process's work); a failure is logged and
    raised as `EngineError` with the exception's name and text."""
    try:
        return named(target, target.score(batch))
    except Exception as e:
        log.exception("engine failed on a batch of %d spectra", len(batch))
        raise EngineError(f"{type(e).__name__}: {e}") from None


def open_scorer(target: SearchTarget, host: EngineHost, name: str,
                cluster: Any = None) -> tuple[Scorer, EngineProcess | None]:  # fmt: skip
    """How an engine worker scores: through ``cluster`` (a started `rtsearch.cluster.door.ClusterScorer`) when
    there is one; else its own `EngineProcess` (started: the target opened, warmed up by the caller) when
    ``host`` says so (``auto``: on a GPU) and the target can be reopened, else ``target.score`` in the caller's
    thread. The process, if any, is the caller's to close."""
    if cluster is not None:
        return cluster.score, None
    if not scores_in_process(target, host):
        if host == "process":
            log.warning("%s: the target has no folder to open again: scoring in the daemon's process", name)
        return target.score, None
    reopen = target.reopen(target.backend.name)
    assert reopen is not None
    engine = EngineProcess(reopen, name).start()
    return engine.score, engine


def scores_in_process(target: SearchTarget, host: EngineHost) -> bool:
    """Whether the engine workers score ``target`` in processes of their own (``host``; ``auto``: on a GPU)
    — it must have a folder to be opened again from."""
    if host == "thread" or (host == "auto" and not target.backend.is_gpu):
        return False
    return target.reopen(target.backend.name) is not None


WARM_UP_BATCH_S = 5.0  # a warm-up batch slower than this at the last one's pace is not run (`warm_up`); the
# ``warm_up_batch_s`` knob (`rtsearch.config.environment`), where set, for a NumPy engine of the daemon's own (the
# tests' daemons: 0.25 s leaves out the 512 spectra that took ~0.9 s of each daemon's start, docs/history/RESULTS.md
# 2026-11-29; a GPU's compiles all run, and a cluster's pacing, which decides from the model the warm-up seeds
# whether a piece's second worker takes a batch, gets the whole warm-up: without it a paired worker got no batch in
# two CI tests)


def warm_up(target: SearchTarget, score: Scorer, sizes: list[int], observe: Callable[[int, float], None], *,
            backend: str | None = None, remote: bool = False) -> None:
    """Run every scoring path through ``score`` before intake opens; ``observe(size, seconds)`` seeds the
    engine-time model.

    CuPy compiles kernels on first use (seconds each on a fresh machine): the target's warm-up
    spectra take every path at a few batch sizes, so no compile lands on a real spectrum's latency.
    The model learns from a second pass only: a compile is not what a batch costs (NumPy compiles
    nothing: one pass). A size whose batch would take more than `WARM_UP_BATCH_S` at the pace of the
    last one is left out (top-down search costs ~0.1 s a spectrum: 512 of them would hold intake
    closed for minutes); the model extrapolates from the sizes it saw. ``backend``: where ``score`` computes
    (default: ``target``'s; a cluster's workers may compile where the front door does not). ``remote``: ``score``
    is a cluster's, whose workers warmed up themselves: a batch it could not answer in time (`EngineError`) ends
    the warm-up, not the daemon.
    """
    spectra = target.warm_up_spectra(64)
    numpy = (backend or target.backend.name) == "numpy"
    own = numpy and not remote  # (a cluster's pacing reads the model this seeds: its warm-up as in production)
    given = tuning().warm_up_batch_s if own else None
    cap = WARM_UP_BATCH_S if given is None else given
    for observing in (True,) if numpy else (False, True):
        pace = 0.0  # seconds a spectrum, in the last batch of this pass (not the first: it may compile)
        for k, size in enumerate(sizes):
            if pace * size > cap:
                break
            batch = (spectra * (size // len(spectra) + 1))[:size]
            t0 = time.perf_counter()
            try:
                score(SpectraBatch.of(batch))
            except EngineError as e:  # a cluster's batch unanswered in time (its workers warmed up themselves)
                if not remote:
                    raise
                log.warning("warm-up: a batch of %d was not answered (%s): the model learns from real batches", size, e)
                return
            took = time.perf_counter() - t0
            pace = took / size if k or observing else 0.0
            if observing:
                observe(size, took)
