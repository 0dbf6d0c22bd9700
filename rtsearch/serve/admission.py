"""Overload decided at the door: the daemon's predicted wait, shared with the intake processes.

A spectrum that cannot be answered within its budget should be answered ``shed`` before it costs
the daemon anything. The daemon knows how long a spectrum arriving now would wait (the batch in
flight, the spectra queued, the engine's measured speed: `rtsearch.serve.batching`); the intake
processes know each spectrum's age (its ``sent_ns`` against their clock) and how long what they
handed the daemon has been waiting in their pipe to it (`Advice.taken_ns`). `Advice` is two shared
64-bit words (a `multiprocessing.RawArray`, no lock: word-sized writes; a torn pair only mixes two
recent values) holding that wait and when it was said; each intake process reads it once a chunk,
takes an advice older than `ADVICE_TTL_NS` as no wait (the daemon says it again at every chunk and
batch while busy), and `late_rows` picks the spectra whose age plus that wait exceeds their budget.
The intake process answers those itself and tells the daemon, which only books them
(`rtsearch.serve.daemon`).

The wait is 0 while the engine is idle and nothing waits: spectra then reach the engine,
whose answers are what keep the prediction honest (a prediction that stayed too high would otherwise
shed everything for ever).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rtsearch.serve.chunks import INT_COLUMNS, budgets_ns

ADVICE_TTL_NS = 50_000_000  # an advice not renewed for 50 ms is stale: the daemon is idle, nothing waits
MAX_TRUSTED_AGE_NS = 60 * 10**9  # a sent_ns further back (or ahead) means the sender's clock differs: age unknown

_LEVEL, _SENT, _WALL = (INT_COLUMNS.index(c) for c in ("ms_level", "sent_ns", "wall_ns"))


class Advice:
    """The daemon's predicted wait in ns, shared with its intake processes (pass it to them at start)."""

    def __init__(self, shared: Any = None, *, intakes: int = 1, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.shared = shared if shared is not None else multiprocessing.get_context("spawn").RawArray("q", 2 + intakes)
        self.clock = clock

    def set_wait(self, ns: int) -> None:
        """Say the wait (ns) of a spectrum arriving now."""
        self.shared[1] = self.clock()
        self.shared[0] = max(0, int(ns))

    def processed(self, intake: int, mono_ns: int) -> None:
        """The daemon took everything intake process ``intake`` had received up to ``mono_ns`` (its stamps)."""
        self.shared[2 + intake] = mono_ns

    def taken_ns(self, intake: int) -> int:
        """The receipt stamp of the newest message of intake ``intake`` the daemon took (0: none yet)."""
        return int(self.shared[2 + intake])

    def wait_ns(self) -> int:
        """The last wait said, or 0 when it is older than `ADVICE_TTL_NS`."""
        wait, said = self.shared[0], self.shared[1]
        return int(wait) if self.clock() - said <= ADVICE_TTL_NS else 0


def late_rows(ints: np.ndarray, floats: np.ndarray, *, wait_ns: int, default_budget_ms: float) -> np.ndarray:
    """Rows of a chunk's columns (`rtsearch.serve.chunks`) to answer ``shed`` now: MS2+ spectra whose age at
    receipt (``wall_ns - sent_ns``, where the sender's clock is plausible) plus ``wait_ns`` exceeds their budget.
    """
    if wait_ns <= 0:
        return np.zeros(0, np.int64)
    age = ints[:, _WALL] - ints[:, _SENT]
    age = np.where((ints[:, _SENT] >= 0) & (np.abs(age) <= MAX_TRUSTED_AGE_NS), np.maximum(age, 0), 0)
    budget_ns = budgets_ns(floats, default_budget_ms)
    return np.flatnonzero((age + wait_ns > budget_ns) & (ints[:, _LEVEL] >= 2))
