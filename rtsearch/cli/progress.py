"""Progress of long work (index builds, searches) on stderr, drawn by tqdm.

On a terminal the bar redraws in place (at most ten times a second); when stderr is not a terminal
(logs, CI, systemd) it prints nothing, so those stay readable. `Progress` keeps the small interface the
commands use (``update``, ``set`` with a total learned late, a context manager) over `tqdm.tqdm`.
"""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm

# no monitor thread: a live thread makes the spectrum readers spawn their workers instead of forking them
# (`rtsearch.io.batches`), and the bars here are updated often enough not to need one
tqdm.monitor_interval = 0


class Progress:
    """``with Progress("digest", total=n) as bar: bar.update(k)``."""

    def __init__(self, label: str, total: int | None = None, *, unit: str = "", stream: TextIO | None = None):
        stream = stream or sys.stderr
        self._bar = tqdm(total=total, desc=f"{label:<14}", unit=f" {unit}" if unit else "it", file=stream,
                         disable=not stream.isatty(), mininterval=0.1, unit_scale=True, dynamic_ncols=True)  # fmt: skip

    @property
    def done(self) -> int:
        return int(self._bar.n)

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def set(self, done: int, total: int | None = None) -> None:
        if total is not None and total != self._bar.total:
            self._bar.total = total
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
