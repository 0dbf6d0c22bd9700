"""Overload decided at the door: the daemon's predicted wait, shared with the intake processes.

A spectrum that cannot be answered within its budget should be answered ``shed`` before it costs
the daemon anything. The daemon knows how long a spectrum arriving now would wait (the batch in
flight, the spectra queued, the engine's measured speed: `rtsearch.serve.engine.batching`); the intake
processes know each spectrum's age (its ``sent_ns`` against their clock) and how long what they
handed the daemon has been waiting in their pipe to it (`Advice.taken_ns`). `Advice` is shared
64-bit words (a `multiprocessing.RawArray`, no lock: word-sized writes; a torn pair only mixes two
recent values) holding that wait, when it was said, how much of it is the engine becoming free (which
passes with the clock: the advice is read as it ages, `Advice.wait_ns`) and what each further spectrum
queued adds to it (the slope); each intake process reads it once a chunk, takes an advice older than
`ADVICE_TTL_NS` as no wait (the daemon says it again at every chunk and batch while busy), and
`late_rows` picks the
spectra whose age plus that wait, plus the slope for each spectrum admitted before them since the
advice was said, exceeds their budget. The intake process answers those itself and tells the daemon,
which only books them (`rtsearch.serve.daemon`). While the daemon lags behind its pipe
(`rtsearch.serve.intake.intake_process.HOLD_NS`) the intake process keeps what it read instead of handing it
over, so that what becomes late is still answered at the door.

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

from rtsearch.serve.intake.chunks import INT_COLUMNS, budgets_ns

ADVICE_TTL_NS = 50_000_000  # an advice not renewed for 50 ms is stale: the daemon is idle, nothing waits
MAX_TRUSTED_AGE_NS = 60 * 10**9  # a sent_ns further back (or ahead) means the sender's clock differs: age unknown

_LEVEL, _SENT, _WALL, _MONO = (INT_COLUMNS.index(c) for c in ("ms_level", "sent_ns", "wall_ns", "mono_ns"))
# the words: wait ns, when it was said, ns a queued spectrum adds, ns of the wait that pass with the clock, taken
_WAIT, _SAID, _SLOPE, _ELAPSING, _TAKEN = range(5)


class Advice:
    """The daemon's predicted wait in ns, shared with its intake processes (pass it to them at start)."""

    def __init__(self, shared: Any = None, *, intakes: int = 1, clock: Callable[[], int] = time.monotonic_ns) -> None:
        spawn = multiprocessing.get_context("spawn")
        self.shared = shared if shared is not None else spawn.RawArray("q", _TAKEN + intakes)
        self.clock = clock

    def set_wait(self, ns: int, slope_ns: int = 0, *, elapsing_ns: int = 0) -> None:
        """Say the wait (ns) of a spectrum arriving now, what each spectrum queued after it adds (ns), and how much of
        the wait is the engine becoming free (ns: a spectrum arriving later waits that much less of it)."""
        self.shared[_SAID] = self.clock()
        self.shared[_SLOPE] = max(0, int(slope_ns))
        self.shared[_ELAPSING] = max(0, min(int(elapsing_ns), int(ns)))
        self.shared[_WAIT] = max(0, int(ns))

    def processed(self, intake: int, mono_ns: int) -> None:
        """The daemon took everything intake process ``intake`` had received up to ``mono_ns`` (its stamps); never
        back. A door report (spectra answered ``shed`` there) goes after chunks handed over with newer spectra: said
        as taken, its older stamp left the newest chunk's waiting in the door's count for ever, the process held all
        it read as if the daemon lagged, and answered none of it until it grew late (30 s, a test's budget, on a busy
        machine)."""
        if mono_ns > self.shared[_TAKEN + intake]:
            self.shared[_TAKEN + intake] = mono_ns

    def taken_ns(self, intake: int) -> int:
        """The receipt stamp of the newest message of intake ``intake`` the daemon took (0: none yet)."""
        return int(self.shared[_TAKEN + intake])

    def wait_ns(self) -> int:
        """The last wait said, less the time since of its part that elapses (an advice said 10 ms ago, while a
        batch had 15 ms to go, waits 10 ms less: read as said, the door shed 3,000 /s at a fake GPU's capacity with
        it 0.82 busy, the since-deleted probe `pacing_fake.py --door`); 0 when it is older than `ADVICE_TTL_NS`."""
        wait, said, elapsing = self.shared[_WAIT], self.shared[_SAID], self.shared[_ELAPSING]
        age = self.clock() - said
        return int(wait) - min(max(age, 0), int(elapsing)) if age <= ADVICE_TTL_NS else 0

    def said_ns(self) -> int:
        """When the last wait was said (clock ns; 0: never)."""
        return int(self.shared[_SAID])

    def slope_ns(self) -> int:
        """What each spectrum queued after the last advice adds to the wait (ns)."""
        return int(self.shared[_SLOPE])


def arrival_times(ints: np.ndarray, now_mono_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's spectra as the daemon takes them at ``now_mono_ns``: their age when their intake process received them
    (seconds: receipt ``wall_ns`` less ``sent_ns``, for the rows whose sender stamped a plausible one) and how long
    since that receipt (seconds, ``mono_ns``: the intake's hold and the pipe) — the two parts of the age the door's
    shedding reads."""
    age, known = _ages(ints, ints[:, _WALL])
    return age[known] / 1e9, np.maximum(now_mono_ns - ints[:, _MONO], 0) / 1e9


def _ages(ints: np.ndarray, at_ns: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each row's age at ``at_ns`` (wall clock, ns; at least 0) and whether it is known: a ``sent_ns`` stamped, and
    within `MAX_TRUSTED_AGE_NS` (further back or ahead, the sender's clock differs)."""
    age = at_ns - ints[:, _SENT]
    return np.maximum(age, 0), (ints[:, _SENT] >= 0) & (np.abs(age) <= MAX_TRUSTED_AGE_NS)


def late_rows(
    ints: np.ndarray, floats: np.ndarray, *, wait_ns: int, default_budget_ms: float, now_ns: int | None = None,
    slope_ns: int = 0, ahead: int = 0,
) -> tuple[np.ndarray, int]:
    """Rows of a chunk's columns (`rtsearch.serve.intake.chunks`) to answer ``shed`` now, and how many MS2+ spectra it
    admits: MS2+ spectra whose age (``now_ns``, else their receipt ``wall_ns``, less ``sent_ns``, where the
    sender's clock is plausible) plus ``wait_ns``, plus ``slope_ns`` for each spectrum admitted before them
    (``ahead`` of this chunk, then its own admitted rows in order), exceeds their budget.
    """
    ms2 = ints[:, _LEVEL] >= 2
    if wait_ns <= 0:
        return np.zeros(0, np.int64), int(ms2.sum())
    age, known = _ages(ints, ints[:, _WALL] if now_ns is None else now_ns)
    age = np.where(known, age, 0)
    room = budgets_ns(floats, default_budget_ms) - age - wait_ns  # ns each spectrum may still wait
    late = ms2 & (room < 0)
    if slope_ns > 0:  # each waits behind `ahead` and the rows before it with room left (late ones go at once)
        fits = (ms2 & ~late).astype(np.int64)
        late = ms2 & (room < (ahead + np.cumsum(fits) - fits) * slope_ns)
    return np.flatnonzero(late), int((ms2 & ~late).sum())
