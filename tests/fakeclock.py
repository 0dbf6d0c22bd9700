"""A nanosecond clock that only moves when a test moves it (the daemon's parts take ``clock() -> int``)."""

from __future__ import annotations


class FakeClock:
    def __init__(self, ns: int = 0) -> None:
        self.ns = ns

    def __call__(self) -> int:
        return self.ns

    def at_ms(self, ms: float) -> None:
        self.ns = round(ms * 1_000_000)

    def advance(self, s: float) -> None:
        self.ns += round(s * 1e9)
