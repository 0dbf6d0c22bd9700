"""What the tests of the engine and results threads (`rtsearch.serve.engine.workers`) share: the demo target made slow,
no refits, a run's spectra as queued jobs, and a pool whose answers' statuses are listed."""

from __future__ import annotations

import time

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import ServeConfig, load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.serve.engine.jobs import Jobs, RunState, Stamps
from rtsearch.serve.engine.workers import WorkerPool

STAGE_S = 0.05  # what scoring, and answering, each batch takes at least here


class SlowTarget:
    """The demo target, each batch's scoring made to take at least ``stage_s``."""

    def __init__(self, target: DatabaseTarget, stage_s: float = STAGE_S) -> None:
        self._target = target
        self.backend = target.backend
        self.stage_s = stage_s

    def score(self, spectra: SpectraBatch):
        t0 = time.perf_counter()
        out = self._target.score(spectra)
        time.sleep(max(0.0, self.stage_s - (time.perf_counter() - t0)))
        return out

    def __getattr__(self, name: str):
        return getattr(self._target, name)


class NoRefits:
    def refit(self, states) -> None:
        pass


def queued(state: RunState, spectra, now: int, budget_ns: int = 60 * 10**9) -> Jobs:
    n = len(spectra)
    col = np.full(n, now, dtype=np.int64)
    stamps = Stamps(col, col, col, np.full(n, budget_ns, np.int64), np.zeros(n, bool))
    return Jobs(SpectraBatch.of(spectra), stamps, np.zeros(n, np.int32), [state])


def statuses_pool(demo_index, n: int) -> tuple[WorkerPool, object, list, list[str]]:
    """A pool of one engine thread on the demo target (answering at once), ``n`` of the bundled run's spectra, and
    the list its answers' statuses go to (the pool not started)."""
    target = SlowTarget(DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy")), 0.0)
    got: list[str] = []

    def answer(answers) -> None:
        for _, results, _ in answers:
            got.extend(st["status"] for st in results.messages())

    pool = WorkerPool(target, ServeConfig(max_batch=8, max_queue=1000, linger_ms=0.0, workers=1), answer=answer,
                      refitter=NoRefits(), record=lambda *a: None)  # fmt: skip
    return pool, target, list(read_spectra(bundled(RUN)))[:n], got
