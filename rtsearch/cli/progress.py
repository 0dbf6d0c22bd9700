"""A small progress bar on stderr for long work (index builds, searches).

It redraws in place on a terminal and prints nothing else there; when
stderr is not a terminal it stays silent until `close`, which prints one
summary line, so logs and CI output stay readable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``with Progress("digest", total=n) as bar: bar.update(k)``."""

    def __init__(self, label: str, total: int | None = None, *, unit: str = "", stream: TextIO | None = None):
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.perf_counter()
        self._last = 0.0

    def update(self, n: int = 1) -> None:
        self.done += n
        self.set(self.done)

    def set(self, done: int, total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        now = time.perf_counter()
        if self.tty and now - self._last >= 0.1:
            self._last = now
            self.stream.write("\r" + self._line() + "\x1b[K")
            self.stream.flush()

    def _line(self) -> str:
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(frac * 30)
            count = f"{self.done:,}/{self.total:,}{unit}"
            return f"{self.label:<14} [{bar:<30}] {count} {elapsed:5.1f}s {rate:,.0f}{unit}/s"
        return f"{self.label:<14} {self.done:,}{unit} {elapsed:5.1f}s {rate:,.0f}{unit}/s"

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r" + self._line() + "\x1b[K\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
