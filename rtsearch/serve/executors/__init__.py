"""The executor seam: where an engine thread's batches are scored.

An engine thread (`rtsearch.serve.engine.workers`) holds one `Executor` and knows nothing of where it scores:

- ``daemon``: the target's own ``score`` in the engine thread (NumPy, or ``[serve] engine = "thread"``);
- ``engine_process``: its own engine process (`engine_process.EngineProcess`, the target opened again there, off the
  daemon's GIL);
- ``cluster``: the cluster's front door (`rtsearch.cluster.door.ClusterScorer`; replicate: the worker this thread
  keeps to), its routing, pacing and faults inside.

Each counts what it scored (`ExecutorStats`: the daemon's metrics read them). Scoring a lone spectrum in the
daemon's own thread rather than through its engine process was measured and not kept: the daemon's GIL costs what the
pipe saves (bench/BASELINES.md, "Daemon").
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rtsearch.batch import SpectraBatch
from rtsearch.config import EngineHost
from rtsearch.matches import ScoredBatch
from rtsearch.search.target import SearchTarget
from rtsearch.serve.executors.engine_process import EngineProcess, Scorer, open_scorer, warm_up
from rtsearch.serve.observe.stats import ExecutorStats

Observe = Callable[[int, float], None]


class Executor:
    """One engine thread's scoring: ``score`` (thread-safe as its scorer is), ``warm_up``, ``stats``, ``close``;
    ``path`` says which it is."""

    def __init__(self, score: Scorer, path: str, process: EngineProcess | None = None,
                 stats: ExecutorStats | None = None) -> None:  # fmt: skip
        self._score, self.path, self.process = score, path, process
        self._stats = stats or ExecutorStats(path)

    def score(self, spectra: SpectraBatch) -> ScoredBatch:
        """``spectra`` scored (raises `EngineError`, or `engine_process.EngineGone` when the process is gone)."""
        t0 = time.perf_counter()
        try:
            return self._score(spectra)
        except Exception:
            self._stats.failed += 1
            raise
        finally:
            self._stats.batches += 1
            self._stats.spectra += len(spectra)
            self._stats.busy_s += time.perf_counter() - t0

    def stats(self) -> ExecutorStats:
        """A copy of what it scored so far (warm-up batches excluded)."""
        return replace(self._stats)

    def warm_up(self, target: SearchTarget, sizes: list[int], observe: Observe, *, backend: str) -> None:
        """Every scoring path through before intake opens (`engine_process.warm_up`; ``observe`` seeds the
        engine-time model)."""
        warm_up(target, self._score, sizes, observe, backend=backend, remote=self.path == "cluster")

    def on_worker(self, worker: int) -> Executor:
        """A cluster's replicate executor kept to one worker (``worker``: the engine thread's lane)."""
        score: Any = self._score  # `ClusterScorer.score`
        return Executor(functools.partial(score, worker=worker), self.path, stats=self._stats)

    def close(self) -> None:
        """Its engine process stops, if it has one."""
        if self.process is not None:
            self.process.close()


def open_executor(target: SearchTarget, host: EngineHost, name: str, cluster: Any = None) -> Executor:
    """An engine thread's executor: ``cluster``'s door when there is one, else an engine process or the daemon's
    thread as ``host`` says (`engine_process.open_scorer`)."""
    score, process = open_scorer(target, host, name, cluster)
    path = "cluster" if cluster is not None else "engine_process" if process is not None else "daemon"
    return Executor(score, path, process)
