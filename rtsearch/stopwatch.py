"""Seconds per named stage of a piece of work (the index build's stages, an engine batch's steps)."""

from __future__ import annotations

import time
from collections.abc import Callable


class Stopwatch:
    """``lap(stage)`` adds the seconds since the previous lap (or since creation) to ``stages[stage]``;
    ``sync`` (a device's) is called before each reading when given."""

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self.sync = sync
        self.stages: dict[str, float] = {}
        self._t = time.perf_counter()

    def __call__(self, stage: str) -> None:
        if self.sync is not None:
            self.sync()
        now = time.perf_counter()
        self.stages[stage] = self.stages.get(stage, 0.0) + now - self._t
        self._t = now
