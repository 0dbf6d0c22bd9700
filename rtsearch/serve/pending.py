"""Jobs waiting in the batcher, by handle: the columns the batcher's integer handles stand for.

The `MicroBatcher` keeps handles, masses and deadlines; `Pending` keeps the `Jobs` they stand for,
one segment an `add` (a chunk of intake), each freed once all its spectra were taken. Handles are
consecutive integers, so a handle's segment is found by bisection over the segments' first handles.
"""

from __future__ import annotations

import numpy as np

from rtsearch.serve.jobs import Jobs


class Pending:
    """Segments of `Jobs` by handle (see the module docstring)."""

    def __init__(self) -> None:
        self._starts: list[int] = []  # first handle of each segment, ascending
        self._segs: dict[int, Jobs] = {}
        self._left: dict[int, int] = {}  # spectra of a segment not taken yet
        self._next = 0

    def __len__(self) -> int:
        return sum(self._left.values())

    def add(self, jobs: Jobs) -> np.ndarray:
        """Keep ``jobs``; their handles, in order."""
        start, n = self._next, len(jobs)
        self._next += n
        if n:
            self._starts.append(start)
            self._segs[start], self._left[start] = jobs, n
        return np.arange(start, start + n, dtype=np.int64)

    def take(self, handles: np.ndarray) -> Jobs:
        """The jobs of ``handles``, segment by segment (each segment's in the handles' order); forgotten here."""
        starts = np.asarray(self._starts, dtype=np.int64)
        seg = np.searchsorted(starts, handles, side="right") - 1
        parts = []
        for k in np.unique(seg).tolist():
            start = int(starts[k])
            mine = handles[seg == k]
            parts.append(self._segs[start].take(mine - start))
            self._left[start] -= len(mine)
            if self._left[start] == 0:
                del self._segs[start], self._left[start]
                self._starts.remove(start)
        return parts[0] if len(parts) == 1 else Jobs.concat(parts)
