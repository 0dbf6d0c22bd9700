"""The executor seam: where an engine thread's batches are scored, and the shortest path a lone spectrum takes.

An engine thread (`rtsearch.serve.engine.workers`) holds one `Executor` and knows nothing of where it scores:

- ``daemon``: the target's own ``score`` in the engine thread (NumPy, or ``[serve] engine = "thread"``);
- ``engine_process``: its own engine process (`engine_process.EngineProcess`, the target opened again there, off the
  daemon's GIL), and, for the first thread, the daemon's own copy of the target as the shortest path of a lone
  spectrum on an idle daemon (two pipe trips and a process wake-up shorter);
- ``cluster``: the cluster's front door (`rtsearch.cluster.door.ClusterScorer`; replicate: the worker this thread
  keeps to), its routing, pacing and faults inside.

The scheduler decides whether a batch is lone (`rtsearch.serve.engine.workers.LONE_MAX`); the executor decides what
that buys (`Executor.path`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from rtsearch.batch import SpectraBatch
from rtsearch.config import EngineHost
from rtsearch.matches import ScoredBatch
from rtsearch.search.target import SearchTarget
from rtsearch.serve.executors.engine_process import EngineProcess, Scorer, open_scorer, score_named, warm_up

Observe = Callable[[int, float], None]


class Executor:
    """One engine thread's scoring: ``score`` (thread-safe as its scorer is), ``warm_up``, ``path``, ``close``."""

    def __init__(self, score: Scorer, path: str, *, process: EngineProcess | None = None,
                 shortest: Scorer | None = None) -> None:  # fmt: skip
        self._score, self._shortest, self.process = score, shortest, process
        self._path = path

    @property
    def has_shortest(self) -> bool:
        """Whether a lone batch has a path shorter than the others' (`score` with ``lone``)."""
        return self._shortest is not None

    def path(self, lone: bool = False) -> str:
        """Where a batch (``lone`` or not) is scored: ``daemon``, ``engine_process`` or ``cluster`` (the metric's)."""
        return "daemon" if lone and self._shortest is not None else self._path

    def score(self, spectra: SpectraBatch, *, lone: bool = False) -> ScoredBatch:
        """``spectra`` scored and named; a lone batch on the shortest path there is (raises `EngineError`, or
        `engine_process.EngineGone` when the engine process is gone)."""
        return (self._shortest if lone and self._shortest is not None else self._score)(spectra)

    def warm_up(self, target: SearchTarget, sizes: list[int], observe: Observe, *, backend: str,
                lone_sizes: list[int]) -> None:  # fmt: skip
        """Every scoring path through before intake opens (`engine_process.warm_up`; ``observe`` seeds the
        engine-time model, from the widest path only); the shortest path at ``lone_sizes``, in this process."""
        warm_up(target, self._score, sizes, observe, backend=backend, remote=self._path == "cluster")
        if self._shortest is not None:
            warm_up(target, self._shortest, lone_sizes, lambda size, seconds: None)

    def on_worker(self, worker: int) -> Executor:
        """A cluster's replicate executor kept to one worker (``worker``: the engine thread's lane)."""
        score: Any = self._score  # `ClusterScorer.score`
        return Executor(functools.partial(score, worker=worker), self._path)

    def close(self) -> None:
        """Its engine process stops, if it has one."""
        if self.process is not None:
            self.process.close()


def open_executor(target: SearchTarget, host: EngineHost, name: str, *, cluster: Any = None,
                  shortest: bool = False) -> Executor:  # fmt: skip
    """An engine thread's executor (`open_scorer` says which); ``shortest``: with an engine process, the daemon's own
    target scores lone batches."""
    score, process = open_scorer(target, host, name, cluster)
    if cluster is not None:
        return Executor(score, "cluster")
    if process is None:
        return Executor(score, "daemon")
    near = functools.partial(score_named, target) if shortest else None
    return Executor(score, "engine_process", process=process, shortest=near)
