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
``shed``), memory never grows with overload. The batcher keeps columns, not an
object a spectrum: integer handles (the caller's) and their mass, arrival and
deadline in arrays.

Overload is decided when spectra arrive, not after they waited: `predicted_done` says when each
newcomer would be answered (after the batch in flight, the spectra waiting, and those ahead of it,
at the engine's measured speed); the daemon answers ``shed`` at once those that would miss their
deadline, and `expire` takes out, `lead_ns` before their deadline, any that no batch could answer in
time any more (a prediction that was too hopeful), so shed answers come within their budget whatever
the offered rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.config.environment import tuning

MS = 1_000_000  # ns per millisecond


# waking up to give spectra up, and answering a pile of them, take time too: they go this much earlier. On a busy
# 2-core machine a thread's wake-up alone was seen 7 ms late, and in the full test suite 15 ms of slack let an answer
# out 0.25 ms after its 50 ms budget (20 ms: the latest 47.9 ms after receipt). A slack widened on late answers fed
# on itself (spectra already late on arrival widened it until every spectrum was given up: docs/history/RESULTS.md); one
# fitted to the measured lag between when the expiry thread meant to answer and when it did would not. On a quiet
# GPU host a quarter of a 100 ms budget (half of a 50 ms one) may be more than needed: RTSEARCH_EXPIRY_SLACK_MS
# overrides it, to be measured there before the default changes (docs/history/RESULTS.md, issue 16).
EXPIRY_SLACK_MS = 25.0


def expiry_slack_ms() -> float:
    """`EXPIRY_SLACK_MS`, or the ``expiry_slack_ms`` knob (`rtsearch.config.environment`)."""
    given = tuning().expiry_slack_ms
    return EXPIRY_SLACK_MS if given is None else given


@dataclass(frozen=True)
class BatchPolicy:
    """Limits of the micro-batcher (see the module docstring)."""

    max_batch: int = 4096
    max_queue: int = 32768
    linger_ms: float = 0.0
    margin_ms: float = 1.0
    slack_ms: float = EXPIRY_SLACK_MS  # waking up and answering those given up (`EXPIRY_SLACK_MS`)

    def __post_init__(self) -> None:
        if self.max_batch < 1 or self.max_queue < self.max_batch:
            raise ValueError("need 1 <= max_batch <= max_queue")
        if self.linger_ms < 0 or self.margin_ms < 0 or self.slack_ms < 0:
            raise ValueError("linger_ms, margin_ms and slack_ms must be >= 0")


FORGET_BELOW = 1 / 3  # a batch under this share of the fixed cost (or of its time) restarts the fit (`EngineTimeModel`)


class EngineTimeModel:
    """Seconds the engine takes for a batch of ``n``: ``fixed + per_item * n``.

    Fitted online by exponentially weighted least squares over the batches
    seen (``halflife`` batches); until two distinct sizes were seen the slope
    stays at its prior and only the intercept is fitted (the slope brought down
    where the batches were quicker than it alone predicts).
    """

    def __init__(self, fixed_s: float = 0.01, per_item_s: float = 2e-5, *, halflife: float = 64.0) -> None:
        self.fixed_s = fixed_s
        self.per_item_s = per_item_s
        self._decay = 0.5 ** (1.0 / halflife)
        self._w = self._x = self._y = self._xx = self._xy = 0.0

    def observe(self, n: int, seconds: float) -> None:
        """Fit in a batch of ``n`` that took ``seconds``. One that took under `FORGET_BELOW` of the fixed cost alone
        starts the fit afresh from it (what was learnt came from a stall, such as a warm-up batch on a busy machine:
        thrown out at once, not over a half-life); so does one under `FORGET_BELOW` of its predicted time once two
        batches or more were fitted, the model scaled down to it (they were dearer than the run's spectra, such as
        the warm-up's at a 50 Da window on NumPy: 20 ms each against the run's 6.6)."""
        if n <= 0 or not math.isfinite(seconds) or seconds < 0:
            return
        if seconds < self.fixed_s * FORGET_BELOW:  # a stall taught the intercept: the slope kept
            self._w = self._x = self._y = self._xx = self._xy = 0.0
        elif self._w >= 1.5 and seconds < self.predict(n) * FORGET_BELOW:  # batches taught it: scaled down to this
            scale = seconds / self.predict(n)
            self.fixed_s, self.per_item_s = self.fixed_s * scale, self.per_item_s * scale
            self._w = self._x = self._y = self._xx = self._xy = 0.0
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
        elif my < self.per_item_s * mx:  # one size seen, quicker than the slope alone: the slope comes down to it
            self.per_item_s = my / mx
        self.fixed_s = max(my - self.per_item_s * mx, 0.0)

    def predict(self, n: Any) -> Any:
        """Seconds for a batch of ``n`` (an int, or an array of sizes)."""
        return self.fixed_s + self.per_item_s * n


class MicroBatcher:
    """Spectra waiting for the engine, as integer handles (the caller's) with their mass, arrival and
    deadline in arrays; see the module docstring. Each `add` is one segment; a `take` joins them."""

    def __init__(self, policy: BatchPolicy, model: EngineTimeModel, clock: Callable[[], int]) -> None:
        self.policy = policy
        self.model = model
        self.clock = clock
        # segments: (handles, mass, arrived_ns, deadline_ns), in arrival order
        self._segs: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._n = 0
        self._earliest = _NEVER  # earliest deadline waiting
        self._oldest = _NEVER  # earliest arrival waiting
        self.lanes, self.overlap_s = 1, 0.0  # engines taking batches side by side; see `_engine_ns`
        self.tail = EngineTimeModel(0.0, 0.0)  # a batch scored to its answers out (the caller fits it); `answer_s`
        self.answering = EngineTimeModel(0.0, 0.0)  # the results thread's own time a batch (the caller fits it)

    def __len__(self) -> int:
        return self._n

    def add(
        self, items: np.ndarray, *, mass: np.ndarray, budget_ms: np.ndarray, arrived_ns: np.ndarray | None = None
    ) -> int:
        """Queue ``items`` (int64 handles) in order; how many were (the rest: ``max_queue`` spectra wait already).

        ``arrived_ns`` (on the batcher's clock) is when each spectrum was received, if earlier than now:
        its budget counts from then.
        """
        k = max(0, min(len(items), self.policy.max_queue - self._n))
        if k == 0:
            return 0
        arrived = np.full(k, self.clock(), np.int64) if arrived_ns is None else np.asarray(arrived_ns[:k], np.int64)
        deadline = arrived + (np.asarray(budget_ms[:k], np.float64) * MS).astype(np.int64)
        self._segs.append((np.asarray(items[:k], np.int64), np.asarray(mass[:k], np.float64), arrived, deadline))
        self._n += k
        self._earliest = min(self._earliest, int(deadline.min()))
        self._oldest = min(self._oldest, int(arrived.min()))
        return k

    def predicted_done(self, n_new: int, *, busy_until_ns: int) -> np.ndarray:
        """When each of ``n_new`` spectra added now would be answered (clock ns, int64 [n_new]).

        The engine is free at ``busy_until_ns`` (or now); then the spectra waiting and the newcomers go in
        batches of at most ``max_batch``, each costing the model's ``fixed + per_item * n``: newcomer ``i``
        is answered after ``b`` batches holding the ``waiting + i + 1`` spectra through it.
        """
        through = self._n + np.arange(1, n_new + 1, dtype=np.int64)
        return max(self.clock(), busy_until_ns) + self._engine_ns(through).astype(np.int64)

    def predicted_last(self, n_new: int, *, busy_until_ns: int) -> int:
        """`predicted_done` of the last of ``n_new`` newcomers (the latest of them), in plain arithmetic: the
        admission asks this first and the whole array only when that one would be late (the array's dozen NumPy
        calls were 12-18 % of a busy lane's event loop, docs/history/RESULTS.md)."""
        return max(self.clock(), busy_until_ns) + int(self._engine_ns(self._n + n_new))

    def model_terms(self) -> tuple[float, ...]:
        """The models' seconds a batch and a spectrum: the engine's, the `tail`'s, `answering`'s (the metrics')."""
        m, t, a = self.model, self.tail, self.answering  # (each enqueue: a literal, not a generator)
        return m.fixed_s, m.per_item_s, t.fixed_s, t.per_item_s, a.fixed_s, a.per_item_s

    def answer_s(self, n: Any) -> Any:
        """Seconds from a batch of ``n`` taken to its answers out: the engine `model`'s, then the `tail`'s."""
        return self.model.predict(n) + self.tail.predict(n)

    def _engine_ns(self, through: Any) -> Any:
        """Ns until the spectrum ``through`` (1-based, waiting ones first; an int or an array) is answered: the
        engine's batches through it, each the model's fixed cost, plus its cost a spectrum — spread over `lanes`
        engines scoring side by side (a cluster's workers), each batch but the first `overlap_s` less (what of a
        batch's time is the daemon's own, done while its worker scores the one before: `rtsearch.serve.engine.pacing`),
        or the one results thread's time for all their batches where that is longer (answering is the slower stage)
        — then the `tail` of its own batch (answering a batch goes on beside the engine's next one)."""
        lane = (through + self.lanes - 1) // self.lanes
        batches = (lane + self.policy.max_batch - 1) // self.policy.max_batch
        fixed, overlap = self.model.fixed_s, min(self.overlap_s, self.model.fixed_s)
        engine = batches * fixed - np.maximum(batches - 1, 0) * overlap + lane * self.model.per_item_s
        answering = batches * self.lanes * self.answering.fixed_s + through * self.answering.per_item_s
        return (np.maximum(engine, answering) + self.tail.predict(np.minimum(lane, self.policy.max_batch))) * 1e9

    def headroom_ns(self) -> int:
        """How long before its deadline a newcomer must be predicted answered to be queued: the margin and
        `EXPIRY_SLACK_MS`. One predicted later would be given up (`lead_ns`) if the prediction slipped at all, after
        costing the daemon more than a ``shed`` at once; the door's advice counts it too."""
        return int((self.policy.margin_ms + self.policy.slack_ms) * MS)

    def lead_ns(self) -> int:
        """How long before its deadline a waiting spectrum is given up: the least a batch takes (the model's batch
        of one) plus the margin and `EXPIRY_SLACK_MS` for waking up and answering those given up, so that they are
        answered ``shed`` before their budget is over, not after."""
        return int((self.answer_s(1) + (self.policy.margin_ms + self.policy.slack_ms) / 1e3) * 1e9)

    def expire_at(self) -> int | None:
        """When the earliest waiting spectrum is to be given up (`lead_ns` before its deadline; ``None``: none
        waits)."""
        return self._earliest - self.lead_ns() if self._n else None

    def expire(self, now: int) -> np.ndarray:
        """Take out the handles whose deadline falls before ``now`` (scoring them could only answer late)."""
        if not self._n or self._earliest >= now:
            return np.zeros(0, np.int64)
        items, mass, arrived, deadline = self._joined()
        late = deadline < now
        keep = ~late
        self._set([(items[keep], mass[keep], arrived[keep], deadline[keep])] if keep.any() else [])
        return items[late]

    def give_up_late(self, start_ns: int) -> np.ndarray:
        """Take out the handles the next batch, starting at ``start_ns``, would answer after their deadline: the
        fewest of the earliest deadlines whose going leaves a batch (what waits, ``max_batch`` at most) answered,
        `answer_s` of it and the margin after ``start_ns``, by the earliest deadline kept. `lead_ns` gives up only
        what a batch of one could not answer; between the two, spectra the deadline rule sent too late (behind a
        busy worker) were scored and answered late (docs/history/RESULTS.md, 2026-11-27 14:50)."""
        n, margin = min(self._n, self.policy.max_batch), self.policy.margin_ms / 1e3
        if not self._n or self._earliest >= start_ns + int((self.answer_s(n) + margin) * 1e9):
            return np.zeros(0, np.int64)  # (the batch of all that waits is in time for the first deadline)
        deadline = np.sort(self._joined()[3])
        kept = np.minimum(self._n - np.arange(self._n), self.policy.max_batch)  # kept if the first j go
        done = start_ns + ((self.answer_s(kept) + margin) * 1e9).astype(np.int64)
        fits = np.flatnonzero(deadline >= done)
        return self.expire(int(deadline[fits[0]]) if fits.size else _NEVER)

    def aged_at(self, share: float) -> int:
        """When the waiting spectra will have spent ``share`` of their budget: ``share`` of the way from the first
        arrival to the first deadline (exact where one spectrum is both, as with one budget for all)."""
        return self._oldest + int(share * (self._earliest - self._oldest)) if self._n else _NEVER

    def flush_at(self) -> int | None:
        """Clock time at which the waiting spectra must go to meet the earliest deadline."""
        if not self._n:
            return None
        n = min(self._n, self.policy.max_batch)
        return self._earliest - int((self.answer_s(n) + self.policy.margin_ms / 1e3) * 1e9)

    def wake_at(self) -> int | None:
        """When `take` could next return a batch with a worker free (``None``: only on arrival)."""
        flush = self.flush_at()
        if flush is None:
            return None
        return min(self._oldest + int(self.policy.linger_ms * MS), flush)

    def take(self, *, workers_free: int, now: bool = False) -> np.ndarray | None:
        """The handles of the next batch to score, by mass, or ``None`` when it should wait (or no worker is free).

        ``now``: don't wait for deadlines or lingering (shutting down, nothing more will come).
        """
        if not self._n or workers_free <= 0:
            return None
        full = now or self._n >= self.policy.max_batch
        wake = self.wake_at()
        if not full and (wake is None or self.clock() < wake):
            return None
        return self._select()

    def drain(self) -> np.ndarray:
        """Every handle waiting, in arrival order (at shutdown)."""
        items, _, _, _ = self._joined()
        self._set([])
        return items

    def _joined(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if len(self._segs) == 1:
            return self._segs[0]
        if not self._segs:
            empty = np.zeros(0, np.int64)
            return empty, np.zeros(0), empty, empty
        return tuple(np.concatenate([seg[k] for seg in self._segs]) for k in range(4))  # type: ignore[return-value]

    def _set(self, segs: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> None:
        self._segs = segs
        self._n = sum(len(seg[0]) for seg in segs)
        self._earliest = min((int(seg[3].min()) for seg in segs), default=_NEVER)
        self._oldest = min((int(seg[2].min()) for seg in segs), default=_NEVER)

    def _select(self) -> np.ndarray:
        items, mass, arrived, deadline = self._joined()
        cap = self.policy.max_batch
        by_mass = np.argsort(mass, kind="stable")
        if len(items) <= cap:
            self._set([])
            return items[by_mass]
        urgent = int(np.argmin(deadline))
        at = int(np.flatnonzero(by_mass == urgent)[0])
        # the `cap` nearest in mass: the window of `cap` (in mass order) holding `at` that reaches
        # least far from its mass (a window centred on `at` by rank need not be); ties: the first
        mu, sorted_mass = mass[urgent], mass[by_mass]
        starts = np.arange(max(at - cap + 1, 0), min(at, len(items) - cap) + 1)
        reach = np.maximum(mu - sorted_mass[starts], sorted_mass[starts + cap - 1] - mu)
        start = int(starts[int(np.argmin(reach))])
        chosen = by_mass[start : start + cap]
        keep = np.ones(len(items), dtype=bool)
        keep[chosen] = False
        self._set([(items[keep], mass[keep], arrived[keep], deadline[keep])])
        return items[chosen]


_NEVER = 2**63 - 1
