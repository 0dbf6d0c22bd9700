"""Jobs waiting in the batcher, by handle: the columns the batcher's integer handles stand for.

The `MicroBatcher` keeps handles, masses and deadlines; `Pending` keeps the `Jobs` they stand for,
one segment an `add` (a chunk of intake), each freed once all its spectra were taken. Handles are
consecutive integers, so a handle's segment is found by bisection over the segments' first handles.

`Pending.claim` does the bookkeeping only (under the caller's lock, which the event loop waits on to queue
spectra) and returns a `Claim`, whose `Claim.jobs` gathers the columns afterwards, outside that lock: a
segment's `Jobs` are never changed once added, so gathering needs no lock (300 chunks of 5 spectra: 0.40 of
the take's 1.48 ms under the lock, on the development machine, `python the since-deleted probe pending_bench.py
--segments 300`).
"""

from __future__ import annotations

import threading

import numpy as np

from rtsearch.serve.engine.jobs import Jobs


class Claim:
    """Spectra claimed from `Pending`: the segments' parts, gathered into one `Jobs` by `jobs` (once, whichever
    thread asks first: the engine thread that claimed them, or `WorkerPool.abandon` at the shutdown bound)."""

    def __init__(self, parts: list[tuple[Jobs, np.ndarray | None]], n: int) -> None:
        self._parts = parts  # (segment, its rows taken, None: the whole segment in order)
        self._n = n
        self._jobs: Jobs | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._n

    def jobs(self) -> Jobs:
        """The claimed spectra, segment by segment (each segment's in the handles' order)."""
        with self._lock:
            if self._jobs is None:
                parts = [jobs if rows is None else jobs.take(rows) for jobs, rows in self._parts]
                self._jobs = parts[0] if len(parts) == 1 else Jobs.concat(parts)
                self._parts = []
            return self._jobs


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
        return self.claim(handles).jobs()

    def claim(self, handles: np.ndarray) -> Claim:
        """`take`'s bookkeeping: ``handles`` are forgotten here at once; the `Claim` gathers their jobs later."""
        if len(self._starts) == 1 and len(handles) == self._left[self._starts[0]]:  # all that waits, of one chunk
            return self._claim_last(handles)  # a lone spectrum: 0.06 -> 0.01 ms (the since-deleted probe
                                              # pending_bench.py --size 1)
        starts = np.asarray(self._starts, dtype=np.int64)
        seg = np.searchsorted(starts, handles, side="right") - 1
        order = np.argsort(seg, kind="stable")
        seg, handles = seg[order], handles[order]
        ks, firsts, counts = np.unique(seg, return_index=True, return_counts=True)
        descents = np.zeros(len(handles), dtype=np.int64)  # a handle below the one before it, same segment
        descents[1:] = (handles[1:] < handles[:-1]) & (seg[1:] == seg[:-1])
        in_order = np.add.reduceat(descents, firsts) == 0 if len(handles) else np.zeros(0, bool)
        parts: list[tuple[Jobs, np.ndarray | None]] = []
        done: set[int] = set()
        for k, lo, n, ordered in zip(ks.tolist(), firsts.tolist(), counts.tolist(), in_order.tolist(), strict=True):
            start = int(starts[k])
            jobs = self._segs[start]
            parts.append((jobs, None if ordered and n == len(jobs) else handles[lo : lo + n] - start))
            self._left[start] -= n
            if self._left[start] == 0:
                del self._segs[start], self._left[start]
                done.add(start)
        if done:  # one pass, not a list.remove a segment (hundreds of chunks a batch)
            self._starts = [s for s in self._starts if s not in done]
        return Claim(parts, len(handles))

    def _claim_last(self, handles: np.ndarray) -> Claim:
        """`claim` of every handle left of the one segment held: as the general path would, without its sorting."""
        start = self._starts[0]
        jobs, rows = self._segs.pop(start), handles - start
        del self._left[start]
        self._starts = []
        whole = len(rows) == len(jobs) and (len(rows) < 2 or bool((rows[1:] > rows[:-1]).all()))
        return Claim([(jobs, None if whole else rows)], len(handles))
