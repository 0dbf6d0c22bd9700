"""Many alignments at once: `align_pairs` on NumPy (the reference, a spectrum's pairs at once: `align_many`) or CuPy
(`kernels.SOURCE`, a block a pair); both give `rtsearch.scoring.topdown.align.align`'s scores
(tests/gpu/test_topdown_parity.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rtsearch.scoring.backend import compiled_kernel
from rtsearch.scoring.topdown.align import NONE, align_many
from rtsearch.scoring.topdown.kernels import SOURCE

THREADS = 256
MAX_LAYERS = 16  # the kernel's MAX_F: (unknown, known) shift counts a pair
PAIRS_PER_LAUNCH = 1024  # bounds the scratch: ~0.8 MB a pair with one 500 Da shift at 0.02 Da


def align_pairs(
    prms: Sequence[np.ndarray], prefixes: Sequence[np.ndarray], pairs: np.ndarray, *, tolerance: float | np.ndarray,
    max_shifts: int, max_shift_mass: float = 500.0, precursor_tolerance: np.ndarray | None = None,
    known: np.ndarray | None = None, max_known: int = 0, known_reach: float = 0.0, xp: Any = np,
) -> np.ndarray:  # fmt: skip
    """Scores [pairs, layers] of aligning ``prms[pairs[k, 0]]`` with ``prefixes[pairs[k, 1]]`` within ``tolerance``
    (Da; one for all pairs or one a pair) and ``precursor_tolerance[k]`` (Da) for pair k's end (default the fragment
    tolerance); ``known`` shifts, ``max_known`` and ``known_reach`` and the layers as `align`'s
    (`rtsearch.scoring.topdown.align.Alignment`)."""
    known = np.zeros(0) if known is None or max_known == 0 else np.ascontiguousarray(known, np.float64)
    fc = max_known + 1 if known.size else 1
    if (max_shifts + 1) * fc > MAX_LAYERS:
        raise ValueError(f"max_shifts {max_shifts} and max_known {max_known}: at most {MAX_LAYERS} layers")
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    end = np.zeros(len(pairs)) if precursor_tolerance is None else np.asarray(precursor_tolerance, np.float64)
    tols = np.broadcast_to(np.asarray(tolerance, np.float64), (len(pairs),))
    if xp is np:
        out = np.full((len(pairs), (max_shifts + 1) * fc), NONE, np.int64)
        groups: dict[tuple[int, float, float], list[int]] = {}  # the pairs of one spectrum's PRMs, aligned at once
        for k, (a, tol, e) in enumerate(zip(pairs[:, 0].tolist(), tols.tolist(), end.tolist(), strict=True)):
            groups.setdefault((a, tol, e), []).append(k)
        for (a, tol, e), ks in groups.items():
            out[ks] = align_many(prms[a], [prefixes[b] for b in pairs[ks, 1].tolist()], tolerance=tol,
                                 max_shifts=max_shifts, max_shift_mass=max_shift_mass, precursor_tolerance=e,
                                 known=known, max_known=fc - 1, known_reach=known_reach)  # fmt: skip
        return out
    reach = max_shifts * max_shift_mass + known_reach  # Da either side of the diagonals, as `align`'s
    return _on_gpu(xp, prms, prefixes, pairs, end, np.ascontiguousarray(tols), max_shifts, reach, known, fc)


def _flat(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum([len(a) for a in arrays], out=off[1:])
    return (np.concatenate(arrays).astype(np.float64) if arrays else np.zeros(0)), off


def _on_gpu(cp: Any, prms: Sequence[np.ndarray], prefixes: Sequence[np.ndarray], pairs: np.ndarray,
            end: np.ndarray, tols: np.ndarray, k: int, reach: float, known: np.ndarray,
            fc: int) -> np.ndarray:  # fmt: skip
    prm, prm_off = _flat(prms)
    pre, pre_off = _flat(prefixes)
    d_prm, d_prm_off, d_pre, d_pre_off = (cp.asarray(a) for a in (prm, prm_off, pre, pre_off))
    layers = (k + 1) * fc
    out = np.full((len(pairs), layers), NONE, np.int64)
    fn = compiled_kernel(cp, SOURCE, "align_pairs", ("--std=c++17",))
    for lo in range(0, len(pairs), PAIRS_PER_LAUNCH):
        part, ends, tol = (a[lo : lo + PAIRS_PER_LAUNCH] for a in (pairs, end, tols))
        n = len(part)
        nbins = int(np.ceil(2 * (reach + tol + np.maximum(tol, ends)) / tol).max()) + 3  # as the kernel
        ncol = int(max(np.diff(pre_off)[part[:, 1]].max(initial=1), 1))
        bins = cp.zeros(n * nbins, dtype=cp.uint64)
        bin_d = cp.empty(n * nbins * layers, dtype=cp.int32)
        hrows = cp.empty(n * 2 * layers * ncol, dtype=cp.int32)
        dcur = cp.empty(n * layers * ncol, dtype=cp.int32)
        colkey = cp.empty(n * ncol, dtype=cp.int64)
        colnew = cp.empty(n * ncol, dtype=cp.int8)
        res = cp.empty(n * layers, dtype=cp.int32)
        args = (d_prm, d_prm_off, d_pre, d_pre_off, cp.asarray(part[:, 0].astype(np.int32)),
                cp.asarray(part[:, 1].astype(np.int32)), cp.asarray(ends), np.int32(n), cp.asarray(tol),
                np.int32(k), np.float64(reach), cp.asarray(known), np.int32(known.shape[0]), np.int32(fc), bins, bin_d,
                np.int64(nbins), hrows, dcur, colkey, colnew, np.int64(ncol), res)  # fmt: skip
        fn((n,), (THREADS,), args)
        out[lo : lo + n] = cp.asnumpy(res).reshape(n, layers)
    return out
