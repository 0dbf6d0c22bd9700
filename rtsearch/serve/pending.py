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
        """The jobs of ``handles``, segment by segment (each segment's in the handles' order); forgotten here.

        A segment taken whole and in order (the usual case: an idle engine takes everything that waits) is
        handed on as it is; only a segment taken in part is copied row by row (`Jobs.take`, ~70 µs each: with
        hundreds of small chunks a batch, that was most of the engine thread's own time in the daemon).
        """
        starts = np.asarray(self._starts, dtype=np.int64)
        seg = np.searchsorted(starts, handles, side="right") - 1
        order = np.argsort(seg, kind="stable")
        seg, handles = seg[order], handles[order]
        ks, firsts, counts = np.unique(seg, return_index=True, return_counts=True)
        descents = np.zeros(len(handles), dtype=np.int64)  # a handle below the one before it, same segment
        descents[1:] = (handles[1:] < handles[:-1]) & (seg[1:] == seg[:-1])
        in_order = np.add.reduceat(descents, firsts) == 0 if len(handles) else np.zeros(0, bool)
        parts = []
        for k, lo, n, ordered in zip(ks.tolist(), firsts.tolist(), counts.tolist(), in_order.tolist(), strict=True):
            start = int(starts[k])
            jobs = self._segs[start]
            parts.append(jobs if ordered and n == len(jobs) else jobs.take(handles[lo : lo + n] - start))
            self._left[start] -= n
            if self._left[start] == 0:
                del self._segs[start], self._left[start]
                self._starts.remove(start)
        return parts[0] if len(parts) == 1 else Jobs.concat(parts)
