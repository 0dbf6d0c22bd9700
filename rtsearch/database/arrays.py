"""Array helpers of the index build: stable sorts on the GPU when there is one, CSR rows, threads.

NumPy releases the GIL inside its loops, so large gathers and reductions split by rows run in
parallel threads with the same result as one call (each row is computed alone).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

MIN_ROWS_PER_THREAD = 1 << 18


def argsort_stable(values: np.ndarray, xp: Any = np) -> np.ndarray:
    """``np.argsort(values, kind="stable")``, on the GPU when ``xp`` is CuPy (its sorts are stable)."""
    if xp is np:
        return np.argsort(values, kind="stable")
    return xp.asnumpy(xp.argsort(xp.asarray(values)))


def ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, value) for every value in [lo[row], hi[row]), row by row — none where hi <= lo."""
    count = np.maximum(hi - lo, 0)
    row = np.repeat(np.arange(lo.shape[0]), count)
    starts = np.cumsum(count) - count
    return row, lo[row] + np.arange(row.shape[0]) - starts[row]


def take_rows(offsets: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` of the CSR table (offsets, values), as a new CSR table."""
    out = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.diff(offsets)[rows], out=out[1:])
    return out, values[ranges(offsets[rows], offsets[rows + 1])[1]]


def in_threads(tasks: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run each task in its own thread (at most one per CPU); their results in order."""
    if len(tasks) <= 1:
        return [t() for t in tasks]
    with ThreadPoolExecutor(max_workers=min(len(tasks), os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda t: t(), tasks))


def row_chunks(n: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges covering ``range(n)``: one per CPU, none under MIN_ROWS_PER_THREAD rows."""
    parts = max(1, min(os.cpu_count() or 1, n // MIN_ROWS_PER_THREAD))
    cuts = np.linspace(0, n, parts + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def take(arrays: Sequence[np.ndarray], idx: np.ndarray) -> list[np.ndarray]:
    """``[a[idx] for a in arrays]``, the gathers split over threads."""
    out = [np.empty((idx.shape[0], *a.shape[1:]), dtype=a.dtype) for a in arrays]

    def part(k: int, lo: int, hi: int) -> Callable[[], None]:
        def run() -> None:
            np.take(arrays[k], idx[lo:hi], axis=0, out=out[k][lo:hi])

        return run

    in_threads([part(k, lo, hi) for k in range(len(arrays)) for lo, hi in row_chunks(idx.shape[0])])
    return out
