"""Many alignments at once: `align_pairs` on NumPy (the reference, pair by pair) or CuPy (`kernels.SOURCE`, a
block a pair); both give `rtsearch.scoring.topdown.align.align`'s scores (tests/gpu/test_topdown_parity.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rtsearch.scoring.topdown.align import NONE, align
from rtsearch.scoring.topdown.kernels import SOURCE

THREADS = 256
PAIRS_PER_LAUNCH = 1024  # bounds the scratch: ~0.8 MB a pair with one 500 Da shift at 0.02 Da


def align_pairs(
    prms: Sequence[np.ndarray], prefixes: Sequence[np.ndarray], pairs: np.ndarray, *, tolerance: float | np.ndarray,
    max_shifts: int, max_shift_mass: float = 500.0, precursor_tolerance: np.ndarray | None = None, xp: Any = np,
) -> np.ndarray:  # fmt: skip
    """Scores [pairs, max_shifts + 1] of aligning ``prms[pairs[k, 0]]`` with ``prefixes[pairs[k, 1]]`` within
    ``tolerance`` (Da; one for all pairs or one a pair) and ``precursor_tolerance[k]`` (Da) for pair k's end
    (default the fragment tolerance)."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    end = np.zeros(len(pairs)) if precursor_tolerance is None else np.asarray(precursor_tolerance, np.float64)
    tols = np.broadcast_to(np.asarray(tolerance, np.float64), (len(pairs),))
    if xp is np:
        out = np.full((len(pairs), max_shifts + 1), NONE, np.int64)
        for k, (a, b) in enumerate(pairs.tolist()):
            out[k] = align(prms[a], prefixes[b], tolerance=float(tols[k]), max_shifts=max_shifts,
                           max_shift_mass=max_shift_mass, precursor_tolerance=float(end[k])).scores  # fmt: skip
        return out
    return _on_gpu(xp, prms, prefixes, pairs, end, np.ascontiguousarray(tols), max_shifts, max_shift_mass)


def _flat(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum([len(a) for a in arrays], out=off[1:])
    return (np.concatenate(arrays).astype(np.float64) if arrays else np.zeros(0)), off


_kernels: dict[int, Any] = {}


def _kernel(cp: Any) -> Any:
    dev = cp.cuda.Device().id
    if dev not in _kernels:
        _kernels[dev] = cp.RawModule(code=SOURCE, options=("--std=c++17",)).get_function("align_pairs")
    return _kernels[dev]


def _on_gpu(cp: Any, prms: Sequence[np.ndarray], prefixes: Sequence[np.ndarray], pairs: np.ndarray,
            end: np.ndarray, tols: np.ndarray, k: int, max_shift_mass: float) -> np.ndarray:  # fmt: skip
    prm, prm_off = _flat(prms)
    pre, pre_off = _flat(prefixes)
    d_prm, d_prm_off, d_pre, d_pre_off = (cp.asarray(a) for a in (prm, prm_off, pre, pre_off))
    out = np.full((len(pairs), k + 1), NONE, np.int64)
    fn = _kernel(cp)
    for lo in range(0, len(pairs), PAIRS_PER_LAUNCH):
        part, ends, tol = (a[lo : lo + PAIRS_PER_LAUNCH] for a in (pairs, end, tols))
        n = len(part)
        nbins = int(np.ceil(2 * (k * max_shift_mass + tol + np.maximum(tol, ends)) / tol).max()) + 3  # as the kernel
        ncol = int(max(np.diff(pre_off)[part[:, 1]].max(initial=1), 1))
        bins = cp.zeros(n * nbins, dtype=cp.uint64)
        bin_d = cp.empty(n * nbins * (k + 1), dtype=cp.int32)
        hrows = cp.empty(n * 2 * (k + 1) * ncol, dtype=cp.int32)
        dcur = cp.empty(n * (k + 1) * ncol, dtype=cp.int32)
        colkey = cp.empty(n * ncol, dtype=cp.int64)
        colnew = cp.empty(n * ncol, dtype=cp.int8)
        res = cp.empty(n * (k + 1), dtype=cp.int32)
        args = (d_prm, d_prm_off, d_pre, d_pre_off, cp.asarray(part[:, 0].astype(np.int32)),
                cp.asarray(part[:, 1].astype(np.int32)), cp.asarray(ends), np.int32(n), cp.asarray(tol),
                np.int32(k), np.float64(k * max_shift_mass), bins, bin_d, np.int64(nbins), hrows, dcur, colkey, colnew,
                np.int64(ncol), res)  # fmt: skip
        fn((n,), (THREADS,), args)
        out[lo : lo + n] = cp.asnumpy(res).reshape(n, k + 1)
    return out
