"""The micro-batcher with the tests' names for its integer handles, on a fake clock in ns (test_batching*)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rtsearch.serve.engine.batching import BatchPolicy, EngineTimeModel, MicroBatcher
from tests.fakeclock import FakeClock


class Named:
    """The batcher with the tests' names for its integer handles: one spectrum added at a time."""

    def __init__(self, batcher: MicroBatcher) -> None:
        self.b, self.names = batcher, []
        self.model = batcher.model

    def add(self, name: Any, *, mass: float, budget_ms: float, arrived_ns: int | None = None) -> bool:
        self.names.append(name)
        handle = np.array([len(self.names) - 1])
        return self.b.add(handle, mass=np.array([mass]), budget_ms=np.array([float(budget_ms)]),
                          arrived_ns=None if arrived_ns is None else np.array([arrived_ns])) == 1  # fmt: skip

    def _named(self, handles: np.ndarray | None) -> list[Any] | None:
        return None if handles is None else [self.names[h] for h in handles.tolist()]

    def take(self, **kw: Any) -> list[Any] | None:
        return self._named(self.b.take(**kw))

    def drain(self) -> list[Any]:
        return self._named(self.b.drain()) or []

    def __len__(self) -> int:
        return len(self.b)

    def flush_at(self) -> int | None:
        return self.b.flush_at()

    def wake_at(self) -> int | None:
        return self.b.wake_at()


def batcher(
    *,
    max_batch: int = 8,
    max_queue: int = 64,
    linger_ms: float = 0.0,
    margin_ms: float = 1.0,
    fixed_s: float = 0.004,
    per_item_s: float = 0.0,
) -> tuple[Named, FakeClock]:
    clock = FakeClock()
    policy = BatchPolicy(max_batch=max_batch, max_queue=max_queue, linger_ms=linger_ms, margin_ms=margin_ms)
    return Named(MicroBatcher(policy, EngineTimeModel(fixed_s=fixed_s, per_item_s=per_item_s), clock)), clock
