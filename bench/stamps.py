"""Stamp a method's calls (`time.perf_counter_ns`, the clock of the daemon's ``mono_ns`` stamps): what the probes
that follow a spectrum or a batch through the daemon wrap (`bench/lone_path.py`, `bench/cluster_roundtrip.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def stamp(owner: Any, name: str, into: list[int], *, after: bool = False,
          when: Callable[..., bool] = lambda *a, **k: True) -> None:  # fmt: skip
    """Wrap ``owner.name`` to append the time of each call (its return, with ``after``) to ``into``, for the calls
    whose arguments (the instance's left out) ``when`` accepts."""
    f = getattr(owner, name)

    def stamped(self: Any, *a: Any, **k: Any) -> Any:
        keep = when(*a, **k)
        if keep and not after:
            into.append(time.perf_counter_ns())
        out = f(self, *a, **k)
        if keep and after:
            into.append(time.perf_counter_ns())
        return out

    setattr(owner, name, stamped)
