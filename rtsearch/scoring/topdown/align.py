"""Spectral alignment with unknown mass shifts: the NumPy reference (CUDA-TP's dynamic programming; MS-Align+).

The grid: rows are a spectrum's PRMs s_0 = 0 < s_1 < … < s_{m-1} = M − H2O (`rtsearch.scoring.topdown.prm`),
columns a proteoform's prefix masses P_0 = 0 < … < P_n. Cell (i, j) pairs them at shift δ = s_i − P_j. A path
runs from the origin (0, 0) to the end (m−1, n), each cell right of and below the one before; a step that keeps
the shift (within the fragment tolerance) is free, one that changes it spends one of at most ``max_shifts``
unknown shifts; its score is the PRMs it passes through (the two ends not counted)::

            P_0  P_1  P_2  P_3  P_4
    s_0 = 0   o                          o: the origin, e: the end
    s_1            x                     s_1 = P_1, s_2 = P_2: on the diagonal δ = 0
    s_2                 x
    s_3                      x           s_3 = P_3 + 80: one shift (+80 Da), a new diagonal
    s_4                           e      s_4 = M − H2O = P_4 + 80: the end on that diagonal; score 3

Recurrences, per number of unknown shifts u and known ones c (the issue's D and H): D[u, c](i, j) = max(D[u,
c](diag(i, j)) + g_i, D[u, c−1](diag_k(i, j)) + g_i for each known shift k, H[u−1, c](i−1, j−1) + g_i), H[u, c](i,
j) = max(D[u, c](i, j), H[u, c](i−1, j), H[u, c](i, j−1)), with g_i = 1 for an inner row and 0 for the end, D[u,
c](0, 0) = 0 for every u, c (so D[u, c] is the best with at most u unknown and c known shifts). diag(i, j) is the
latest cell of an earlier row on the same diagonal: the diagonals are bins of the tolerance's width, a cell's
predecessor is looked up in its bin and those beside that can hold a shift within the tolerance, the latest of
those (by row, then column) within the tolerance wins, and none when it is not left of j; diag_k(i, j), the same on
the diagonal δ − Δ_k of known shift k (a known PTM's mass): CUDA-TP's known shifts, counted apart from the unknown
ones (which residues may carry one is checked when the PrSM is reported, `rtsearch.scoring.topdown.localize`, not
in the alignment). A cell directly below its bin's latest (the same PRM twice) is not written there. Cells with |δ|
above ``max_shifts × max_shift_mass`` (plus the known shifts' ``known_reach``) are not on any path. The end cell
matches its diagonal within the precursor tolerance.
A GPU kernel must give the same scores (its parity test compares them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NONE = -(1 << 30)  # no path


@dataclass(frozen=True)
class Alignment:
    """The best scores from origin to end with at most u unknown shifts and c known ones, u = 0 … ``max_shifts``,
    c = 0 … ``max_known``, at index u × (``max_known`` + 1) + c (`NONE`: no such path)."""

    scores: tuple[int, ...]

    @property
    def best(self) -> tuple[int, int]:
        """(score, index): the highest score, at the lowest index among equals; (`NONE`, -1) if none."""
        top = max(self.scores)
        return (top, self.scores.index(top)) if top > NONE else (NONE, -1)


def align(prm: np.ndarray, prefix: np.ndarray, *, tolerance: float, max_shifts: int, max_shift_mass: float = 500.0,
          precursor_tolerance: float | None = None, known: np.ndarray | None = None, max_known: int = 0,
          known_reach: float = 0.0) -> Alignment:  # fmt: skip
    """Align spectrum PRMs ``prm`` (ends included; best merged within the tolerance, `prm_masses`'s
    ``merge_within``: a PRM given twice is read once on a diagonal but could be counted twice across shifts)
    with a proteoform's prefix masses ``prefix`` (P_0 = 0 first). ``known``: masses (Da) of known shifts, up to
    ``max_known`` of them on a path, each within ``known_reach`` Da of the diagonals' range in all."""
    scores = align_many(prm, [prefix], tolerance=tolerance, max_shifts=max_shifts, max_shift_mass=max_shift_mass,
                        precursor_tolerance=precursor_tolerance, known=known, max_known=max_known,
                        known_reach=known_reach)  # fmt: skip
    return Alignment(tuple(int(v) for v in scores[0]))


def align_many(prm: np.ndarray, prefixes: Sequence[np.ndarray], *, tolerance: float, max_shifts: int,
               max_shift_mass: float = 500.0, precursor_tolerance: float | None = None, known: np.ndarray | None = None,
               max_known: int = 0, known_reach: float = 0.0) -> np.ndarray:  # fmt: skip
    """`align` of one spectrum's ``prm`` with each of ``prefixes`` at once: their scores [prefixes, layers]. The
    proteoforms' columns are laid end to end and every row is one pass over all of them (a spectrum's few hundred
    candidates: its rows are theirs), each proteoform with its own diagonal bins; a row's running maximum stops at
    each proteoform's first column. Pair by pair, the alignments took 1.0 s of a FLASHApp spectrum's 1.8 s on the
    CPU; see bench/BASELINES.md "Top-down on the CPU"."""
    s = np.asarray(prm, np.float64)
    m, pairs = s.shape[0], len(prefixes)
    known = np.zeros(0) if known is None or max_known == 0 else np.asarray(known, np.float64)
    fc = max_known + 1 if known.size else 1  # known-count layers
    layers = (max_shifts + 1) * fc
    if m < 2 or pairs == 0:
        return np.full((pairs, layers), NONE, np.int64)
    limit = max_shifts * max_shift_mass + known_reach + tolerance
    end_tol = max(tolerance, precursor_tolerance or 0.0)
    reach = limit + end_tol
    bins = int(np.ceil(2 * reach / tolerance)) + 3
    size = np.array([len(p) for p in prefixes], np.int64)  # n + 1 columns a proteoform
    base = np.cumsum(size) - size  # its column 0 among all
    p = np.concatenate([np.asarray(x, np.float64) for x in prefixes])
    owner = np.repeat(np.arange(pairs), size)
    column = np.arange(p.shape[0]) - base[owner]
    last_i = np.full(pairs * bins, -1, np.int64)  # per proteoform and diagonal bin: the latest cell written there
    last_j = np.full(pairs * bins, -1, np.int64)
    last_d = np.zeros(pairs * bins)
    D = np.full((layers, m, p.shape[0]), NONE, np.int32)
    H = np.zeros((layers, p.shape[0]), np.int64)  # the row before's; row 0: the origin, in every layer
    D[:, 0, base] = 0  # D[u, c] is "at most u and c"
    tables = (last_i, last_j, last_d, bins, reach, tolerance)
    _write(tables, np.zeros(pairs, np.int64), np.zeros(pairs, np.int64), np.zeros(pairs), np.arange(pairs))
    inner = np.flatnonzero(column >= 1)
    at, cols, pc, who = inner, column[inner], p[inner], owner[inner]
    counted = np.arange(layers) % fc > 0  # the layers with a known shift to spend: a known diagonal leads there
    segment = owner.astype(np.int64) << 32  # a proteoform's running maximum starts afresh at its column 0
    for i in range(1, m):
        delta = s[i] - pc
        end = i == m - 1
        ok = np.abs(delta) <= limit + (end_tol if end else 0.0)
        if end:
            ok &= cols == size[who] - 1
        g, j, k, d = at[ok], cols[ok], who[ok], delta[ok]
        gain = 0 if end else 1
        within = end_tol if end else tolerance
        # every layer of the row at once (a row's layers read only earlier rows): from the diagonal, the same layer;
        # from a known shift's diagonal, the layer with one known shift fewer; from the row above, one unknown fewer
        best = np.full((layers, j.shape[0]), NONE, np.int64)
        for q, x in enumerate((0.0, *known)):
            prev_i, prev_j = _predecessor(tables, d - x, j, k, within)
            has = np.flatnonzero(prev_i >= 0)
            if not has.size:
                continue
            came = D[:, prev_i[has], base[k[has]] + prev_j[has]]
            if q:
                best[1:, has] = np.where(counted[1:, None], np.maximum(best[1:, has], came[:-1]), best[1:, has])
            else:
                best[:, has] = np.maximum(best[:, has], came)
        if layers > fc:
            best[fc:] = np.maximum(best[fc:], H[:-fc, g - 1])
        D[:, i, g] = np.where(best > NONE, best + gain, NONE)
        H = np.maximum.accumulate(segment | (np.maximum(D[:, i], H) - NONE), axis=1) - segment + NONE
        _write(tables, np.full(j.shape[0], i), j, d, k)
    return D[:, m - 1, base + size - 1].T.astype(np.int64)


Tables = tuple[np.ndarray, np.ndarray, np.ndarray, int, float, float]  # last_i, last_j, last_d, bins, reach, tolerance


def _key(d: np.ndarray, reach: float, tolerance: float) -> np.ndarray:
    return np.floor((d + reach) / tolerance).astype(np.int64) + 1


def _write(tables: Tables, i: np.ndarray, j: np.ndarray, d: np.ndarray, k: np.ndarray) -> None:
    last_i, last_j, last_d, bins, reach, tolerance = tables
    key = _key(d, reach, tolerance) + k * bins
    new = last_j[key] != j  # a cell below one of its bin in the same column (a PRM twice) is not written: the
    key, i, j, d = key[new], i[new], j[new], d[new]  # one above it, whose path it would only repeat, stays
    last_i[key], last_j[key], last_d[key] = i, j, d  # in order: the rightmost cell of a bin is written last


def _predecessor(tables: Tables, d: np.ndarray, j: np.ndarray, k: np.ndarray,
                 within: float) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """For cells of proteoforms ``k`` at shifts ``d``, columns ``j``: the latest earlier cell on their diagonal (-1:
    none) — of the cells in their bin and those beside it that can hold a shift within ``within``, the one of the
    latest row, then column (each bin's looked at at once, a cell as row × 2³² + column: the largest is the latest)."""
    last_i, last_j, last_d, bins, reach, tolerance = tables
    r = int(np.ceil(within / tolerance))  # bins either side that can hold a shift within ``within``
    kk = _key(d, reach, tolerance) + np.arange(-r, r + 1)[:, None]
    kk = np.minimum(np.maximum(kk, 0), bins - 1) + k * bins
    ci, cj = last_i[kk], last_j[kk]
    ok = (ci >= 0) & (cj < j) & (np.abs(last_d[kk] - d) <= within)
    latest = np.where(ok, (ci << 32) | cj, -1).max(axis=0)
    found = latest >= 0
    return np.where(found, latest >> 32, -1), np.where(found, latest & 0xFFFFFFFF, -1)
