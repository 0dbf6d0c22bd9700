"""Micro-batching: spectra waiting for the engine, grouped by precursor mass, flushed on time.

Pure logic with an injected clock (``clock() -> int`` nanoseconds), so tests
drive it with a fake one. The daemon asks `MicroBatcher.take` for a batch
whenever something changes (a spectrum arrives, a worker frees, a timer
fires); ``take`` answers with a batch or ``None``, and `MicroBatcher.wake_at`
says when to ask again.

When a batch goes:

- it is full (``max_batch`` spectra), or
- a worker is free and the oldest spectrum has lingered ``linger_ms``
  (default 0: an idle worker takes whatever waits; batches then grow only
  when the engine is busy, which is when batching pays), or
- a worker is free and waiting longer would break the earliest deadline:
  ``deadline - predicted engine time for this batch - margin`` has passed.

Which spectra go: all that wait, or, when more wait than fit, the
``max_batch`` nearest in precursor mass to the spectrum with the earliest
deadline, so the batch's candidate ranges overlap. Bounded: beyond
``max_queue`` waiting spectra `MicroBatcher.add` refuses (the daemon answers
``shed``), memory never grows with overload.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

MS = 1_000_000  # ns per millisecond


@dataclass(frozen=True)
class BatchPolicy:
    """Limits of the micro-batcher (see the module docstring)."""

    max_batch: int = 4096
    max_queue: int = 32768
    linger_ms: float = 0.0
    margin_ms: float = 1.0

    def __post_init__(self) -> None:
        if self.max_batch < 1 or self.max_queue < self.max_batch:
            raise ValueError("need 1 <= max_batch <= max_queue")
        if self.linger_ms < 0 or self.margin_ms < 0:
            raise ValueError("linger_ms and margin_ms must be >= 0")


class EngineTimeModel:
    """Seconds the engine takes for a batch of ``n``: ``fixed + per_item * n``.

    Fitted online by exponentially weighted least squares over the batches
    seen (``halflife`` batches); until two distinct sizes were seen the slope
    stays at its prior and only the intercept is fitted.
    """

    def __init__(self, fixed_s: float = 0.01, per_item_s: float = 2e-5, *, halflife: float = 64.0) -> None:
        self.fixed_s = fixed_s
        self.per_item_s = per_item_s
        self._decay = 0.5 ** (1.0 / halflife)
        self._w = self._x = self._y = self._xx = self._xy = 0.0

    def observe(self, n: int, seconds: float) -> None:
        if n <= 0 or not math.isfinite(seconds) or seconds < 0:
            return
        d = self._decay
        self._w = self._w * d + 1.0
        self._x = self._x * d + n
        self._y = self._y * d + seconds
        self._xx = self._xx * d + n * n
        self._xy = self._xy * d + n * seconds
        mx, my = self._x / self._w, self._y / self._w
        var = self._xx / self._w - mx * mx
        if var > 1e-9 * max(mx * mx, 1.0):
            slope = (self._xy / self._w - mx * my) / var
            self.per_item_s = max(slope, 0.0)
        self.fixed_s = max(my - self.per_item_s * mx, 0.0)

    def predict(self, n: int) -> float:
        return self.fixed_s + self.per_item_s * n


@dataclass(slots=True)
class _Pending(Generic[T]):
    item: T
    mass: float
    arrived_ns: int
    deadline_ns: int


class MicroBatcher(Generic[T]):
    """Spectra waiting for the engine; see the module docstring."""

    def __init__(
        self, policy: BatchPolicy, model: EngineTimeModel, clock: Callable[[], int]
    ) -> None:
        self.policy = policy
        self.model = model
        self.clock = clock
        self._pending: list[_Pending[T]] = []

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, item: T, *, mass: float, budget_ms: float, arrived_ns: int | None = None) -> bool:
        """Queue ``item``; ``False`` (nothing queued) when ``max_queue`` spectra already wait.

        ``arrived_ns`` (on the batcher's clock) is when the spectrum was received, if earlier
        than now: its budget counts from then.
        """
        if len(self._pending) >= self.policy.max_queue:
            return False
        now = self.clock() if arrived_ns is None else arrived_ns
        self._pending.append(_Pending(item, mass, now, now + int(budget_ms * MS)))
        return True

    def flush_at(self) -> int | None:
        """Clock time at which the waiting spectra must go to meet the earliest deadline."""
        if not self._pending:
            return None
        n = min(len(self._pending), self.policy.max_batch)
        earliest = min(p.deadline_ns for p in self._pending)
        return earliest - int((self.model.predict(n) + self.policy.margin_ms / 1e3) * 1e9)

    def wake_at(self) -> int | None:
        """When `take` could next return a batch with a worker free (``None``: only on arrival)."""
        if not self._pending:
            return None
        oldest = min(p.arrived_ns for p in self._pending)
        flush = self.flush_at()
        assert flush is not None
        return min(oldest + int(self.policy.linger_ms * MS), flush)

    def take(self, *, workers_free: int, now: bool = False) -> list[T] | None:
        """The next batch to score, or ``None`` when it should wait (or no worker is free).

        ``now``: don't wait for deadlines or lingering (shutting down, nothing more will come).
        """
        if not self._pending or workers_free <= 0:
            return None
        full = now or len(self._pending) >= self.policy.max_batch
        wake = self.wake_at()
        if not full and (wake is None or self.clock() < wake):
            return None
        return self._select()

    def drain(self) -> list[T]:
        """Everything waiting, in arrival order (at shutdown)."""
        items = [p.item for p in self._pending]
        self._pending = []
        return items

    def _select(self) -> list[T]:
        pend = self._pending
        cap = self.policy.max_batch
        if len(pend) <= cap:
            chosen, self._pending = pend, []
        else:
            by_mass = sorted(range(len(pend)), key=lambda i: pend[i].mass)
            urgent = min(range(len(pend)), key=lambda i: pend[i].deadline_ns)
            at = by_mass.index(urgent)
            # the `cap` nearest in mass: the window of `cap` (in mass order) holding `at` that
            # reaches least far from its mass (a window centred on `at` by rank need not be)
            mu = pend[urgent].mass
            start = min(
                range(max(at - cap + 1, 0), min(at, len(pend) - cap) + 1),
                key=lambda s: max(mu - pend[by_mass[s]].mass, pend[by_mass[s + cap - 1]].mass - mu),
            )
            take = set(by_mass[start : start + cap])
            chosen = [pend[i] for i in by_mass[start : start + cap]]
            self._pending = [p for i, p in enumerate(pend) if i not in take]
            return [p.item for p in chosen]
        chosen.sort(key=lambda p: p.mass)
        return [p.item for p in chosen]
