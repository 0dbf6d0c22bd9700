"""Truncated proteoforms: which sub-sequences [a, b) of which proteins a spectrum may be, by its two diagonals.

A truncated proteoform starts at residue a and ends before residue b of its protein. Its N-terminal ions sit
on the diagonal shift −P_a (a PRM s_i matches P_a + s_i), its C-terminal ions on the one anchored at b (P_b −
(M − H2O − s_i)); an alignment with one shift runs along the first, then the second. Over the database's
prefix masses laid end to end (each protein after a gap no PRM can bridge, so the array is increasing), every
position's count on both diagonals is one sorted search a PRM (MS-Filter's diagonal counts, CuPy or NumPy);
the best starts and ends, paired where the mass between them is the precursor's within the shifts' range, are
the candidates (``[(protein, a, b)]``, best first) to align (`rtsearch.scoring.topdown.align`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rtsearch.database.arrays import ranges
from rtsearch.proteoforms.database import ProteoformDatabase
from rtsearch.scoring.backend import compiled_kernel
from rtsearch.scoring.topdown.kernels import DIAGONAL_SOURCE

GAP = 1.0e6  # Da between proteins laid end to end: more than any PRM
BLOCK = 1 << 15  # positions whose differences `_host_counts` takes at once
OFFSETS = 8  # and residue offsets d
THREADS = 256


def lanes(mass: np.ndarray) -> np.ndarray:
    """Where each of several increasing mass ladders (of total ``mass`` each) starts when laid end to end, a `GAP`
    after the one before, so that the whole is increasing and no difference within one spans two."""
    before = np.cumsum(mass) - mass
    return np.arange(mass.shape[0]) * GAP + before


class Positions:
    """The database's prefix masses laid end to end (``mass``, increasing) and each position's protein."""

    def __init__(self, db: ProteoformDatabase, xp: Any = np) -> None:
        n = len(db.accessions)
        sizes = np.diff(db.offsets) + 1  # n + 1 prefix masses a protein
        self.protein = np.repeat(np.arange(n), sizes)
        self.start = np.repeat(db.offsets[:-1] + np.arange(n), sizes)  # each position's protein's first
        full = db.prefix[db.offsets[1:] + np.arange(n)]  # each protein's residue mass
        base = np.repeat(lanes(full), sizes)
        self.mass_host = db.prefix + base
        self.xp = xp
        self.mass = xp.asarray(self.mass_host)

    def counts(self, prm: np.ndarray, m_res: float, tol: float) -> tuple[Any, Any]:
        """Per position: inner PRMs on its N-terminal diagonal (as a start) and on its C-terminal one (as an end).
        On the GPU, `kernels.DIAGONAL_SOURCE`, a thread a position walking its targets; on the host, `_host_counts`
        (the same counts: tests/gpu/test_topdown_parity.py)."""
        xp, g = self.xp, self.mass
        inner = np.ascontiguousarray(prm[1:-1], np.float64)
        if xp is np:
            return _host_counts(self.mass_host, inner, m_res, tol)
        n_count = xp.zeros(g.shape[0], dtype=xp.int32)
        c_count = xp.zeros(g.shape[0], dtype=xp.int32)
        if inner.size:
            n = int(g.shape[0])
            fn = compiled_kernel(xp, DIAGONAL_SOURCE, "diagonal_counts")
            args = (g, np.int64(n), xp.asarray(inner), np.int32(inner.size), np.float64(m_res), np.float64(tol),
                    n_count, c_count)
            fn(((n + THREADS - 1) // THREADS,), (THREADS,), args)
        return n_count, c_count


def _host_counts(g: np.ndarray, inner: np.ndarray, m_res: float, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """`Positions.counts` on the host, by residue offsets: a PRM s is on position i's N-terminal diagonal when
    some g[i + d] − g[i] is within ``tol`` of s, on position i + d's C-terminal one when that difference is within
    ``tol`` of m_res − s. For d = 0, 1, … while a difference within the protein can still be m_res, `BLOCK`
    positions at a time (their arrays stay in cache), each difference of the positions' mass bins (``tol`` / 4
    wide, integers) is looked up in a table that marks the bins either kind of PRM may reach (one more each side
    for the bins' rounding); the few marked are checked exactly. Two prefix masses of a protein are a residue
    apart (57 Da at least), so a PRM meets at most one difference of a position: a (position, PRM) pair is
    counted once as the sorted search counted it. That search, one a (position, PRM), took 12–16 s a FLASHApp
    spectrum on a 2-core EPYC; this, see bench/BASELINES.md "Top-down on the CPU"."""
    n = g.shape[0]
    n_count, c_count = np.zeros(n, np.int32), np.zeros(n, np.int32)
    if inner.size == 0 or n == 0:
        return n_count, c_count
    n_count += int(np.sum(inner <= tol))  # d = 0: the position itself
    c_count += int(np.sum(m_res - inner <= tol))
    width = tol / 4
    cap = m_res + tol  # no difference beyond reaches a PRM either way
    table = np.zeros(int(cap / width) + 4, np.uint8)
    for bit, at in ((1, inner), (2, m_res - inner)):
        first = np.maximum(np.floor((at - tol) / width).astype(np.int64) - 1, 0)
        last = np.floor((at + tol) / width).astype(np.int64) + 1
        table[ranges(first, last + 1)[1]] |= bit
    table[-1] = 0  # where every difference beyond ``cap`` is clipped to
    bins = np.floor(g / width).astype(np.int64)
    reach = np.searchsorted(g, g + cap, side="right") - np.arange(n) - 1  # each position's last d
    hits: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (positions i, d, which bits) of marked differences
    index = np.empty(BLOCK, np.int64)
    flags = np.empty((OFFSETS, BLOCK), np.uint8)  # a block's marks for `OFFSETS` d at once: one search for the marked
    for lo in range(0, n, BLOCK):
        size = min(lo + BLOCK, n) - lo
        deepest = int(reach[lo : lo + size].max(initial=0))
        for d0 in range(1, deepest + 1, OFFSETS):
            rows = min(OFFSETS, deepest + 1 - d0)
            for k in range(rows):
                m = max(min(size, n - lo - d0 - k), 0)  # the last block's last positions have no d on
                np.subtract(bins[lo + d0 + k : lo + d0 + k + m], bins[lo : lo + m], out=index[:m])
                np.take(table, index[:m], out=flags[k, :m], mode="clip")
                flags[k, m:size] = 0
            at = np.flatnonzero(np.bitwise_or.reduce(flags[:rows, :size], axis=0))
            if at.size:
                row, t = np.nonzero(flags[:rows, at])
                hits.append((at[t] + lo, row + d0, flags[row, at[t]]))
    if not hits:
        return n_count, c_count
    i, d, bits = (np.concatenate(v) for v in zip(*hits, strict=True))
    j = i + d
    delta = g[j] - g[i]
    for bit, counts, where, x in ((1, n_count, i, delta), (2, c_count, j, m_res - delta)):
        on = (bits & bit) > 0  # x: the PRM each difference would be
        row, _ = ranges(np.searchsorted(inner, x[on] - tol), np.searchsorted(inner, x[on] + tol, side="right"))
        counts += np.bincount(where[on][row], minlength=n).astype(np.int32)
    return n_count, c_count


def candidates(pos: Positions, prm: np.ndarray, m_res: float, *, tol: float, window: float, starts: int = 50,
               limit: int = 200) -> list[tuple[int, int, int]]:  # fmt: skip
    """(protein, a, b) sub-sequences whose mass is ``m_res`` within ``window`` Da, from the ``starts`` best starts
    and ends by their diagonal counts; at most ``limit``, by the two counts' sum."""
    xp = pos.xp
    n_count, c_count = pos.counts(prm, m_res, tol)
    g = pos.mass_host
    a_best, b_best = _best(n_count, starts, xp), _best(c_count, starts, xp)
    # each best start's ends within the window (g in [x - window, x + window)), and each best end's starts
    r1, b1 = ranges(*(np.searchsorted(g, g[a_best] + m_res + w) for w in (-window, window)))
    r2, a2 = ranges(*(np.searchsorted(g, g[b_best] - m_res + w) for w in (-window, window)))
    a, b = np.concatenate([a_best[r1], a2]), np.concatenate([b1, b_best[r2]])
    keep = (pos.protein[a] == pos.protein[b]) & (b > a)
    pair = np.unique(a[keep] * g.shape[0] + b[keep])  # by (a, b)
    a, b = pair // g.shape[0], pair % g.shape[0]
    score = _host(xp, n_count[xp.asarray(a)] + c_count[xp.asarray(b)]) if pair.size else np.zeros(0, np.int64)
    top = np.lexsort((b, a, -score.astype(np.int64)))[:limit]
    a, b = a[top], b[top]
    return list(zip(pos.protein[a].tolist(), (a - pos.start[a]).tolist(), (b - pos.start[a]).tolist(), strict=True))


ISOTOPE = 1.00235  # Da between isotopes of a protein's averagine (a deconvolution's precursor may be off by one)


def terminal(db: ProteoformDatabase, pos: Positions, m_res: float, *, tol: float,
             isotopes: tuple[int, ...] = (0, -1, 1)) -> list[tuple[int, int, int, int]]:  # fmt: skip
    """Terminal truncations whose mass is the precursor's (``m_res``, residues only, within ``tol`` after an
    isotope error of ``isotopes``): (protein, a, b, form) for every N-terminal form cut short at b (a prefix, form
    ≥ 0) and every protein's C-terminal piece from a (a suffix, form -1). TopPIC's zero-shift filter finds these by
    mass alone; the diagonals of `candidates` miss those with few fragments. `terminals` of one precursor."""
    return terminals(db, pos, np.array([m_res]), np.array([tol]), isotopes)[0]


PRECURSORS_AT_ONCE = 32  # `terminals`' precursors a sorted search (~11 MB each on the E. coli database)


def terminals(db: ProteoformDatabase, pos: Positions, m_res: np.ndarray, tol: np.ndarray,
              isotopes: tuple[int, ...] = (0, -1, 1)) -> list[list[tuple[int, int, int, int]]]:  # fmt: skip
    """`terminal` of each precursor (``m_res`` and ``tol`` one a precursor), `PRECURSORS_AT_ONCE` in one sorted
    search on the positions' backend, of which only the protein ends that found a position come back."""
    g, xp = pos.mass_host, pos.xp
    n = len(db.accessions)
    first = db.offsets[:-1] + np.arange(n)  # each protein's position 0 in ``g``
    last = db.offsets[1:] + np.arange(n)  # and its position n
    starts = first[db.form_protein] + db.form_start  # each form's first position
    ends, heads, delta = (xp.asarray(v) for v in (g[last], g[starts], db.form_delta))
    width = n + starts.shape[0]  # a row: the suffixes' starts (one a protein), then the prefixes' ends (one a form)
    out: list[list[tuple[int, int, int, int]]] = []
    for lo_p in range(0, m_res.shape[0], PRECURSORS_AT_ONCE):
        m = np.add.outer(m_res[lo_p : lo_p + PRECURSORS_AT_ONCE], np.array(isotopes) * ISOTOPE).reshape(-1, 1)
        d_m = xp.asarray(m)
        x = xp.concatenate([ends[None, :] - d_m, heads[None, :] + d_m - delta[None, :]], axis=1)
        t = xp.asarray(np.repeat(tol[lo_p : lo_p + PRECURSORS_AT_ONCE], len(isotopes))[:, None])
        lo = xp.searchsorted(pos.mass, (x - t).ravel())
        hi = xp.searchsorted(pos.mass, (x + t).ravel(), side="right")
        hit = xp.flatnonzero(hi > lo)
        hit, lo, hi = (_host(xp, v) for v in (hit, lo[hit], hi[hit]))
        row, at = ranges(lo, hi)
        cell = hit[row]
        which, col = cell // width // len(isotopes), cell % width  # the precursor (of this chunk) and the column
        kind = (col < n).astype(np.int64)  # 1: a suffix
        r = col - n * (1 - kind)  # the protein (suffix) or the form (prefix)
        k = np.where(kind == 1, r, db.form_protein[np.where(kind == 1, 0, r)])
        keep = (first[k] < at) & (at < last[k]) & ((kind == 1) | (at > starts[np.where(kind == 1, 0, r)]))
        k, at, r, kind, which = k[keep], at[keep], r[keep], kind[keep], which[keep]  # not another's, nor whole
        a = np.where(kind == 1, at, starts[np.where(kind == 1, 0, r)])
        b = np.where(kind == 1, last[k], at)
        found = np.stack([which, k, a - first[k], b - first[k], np.where(kind == 1, -1, r)], axis=1)
        found = np.unique(found, axis=0) if found.shape[0] else found
        split = np.searchsorted(found[:, 0], np.arange(m.shape[0] // len(isotopes) + 1))
        out += [[tuple(v) for v in found[i:j, 1:].tolist()] for i, j in zip(split[:-1], split[1:], strict=True)]
    return out


def _best(counts: Any, k: int, xp: Any = np) -> np.ndarray:
    """Positions of the ``k`` highest ``counts`` (non-negative), highest first, the lower position first among equals
    (a stable sort's first ``k``), on either backend alike. By the counts' histogram: the k-th highest count c, the
    positions above it (fewer than ``k``) sorted, then the first positions at c. No sort of every position: one of
    1.4 M keys a spectrum took 1.9 ms on an H100 (0.64 s of the FLASHApp run), a partition on the host 64 ms."""
    n = int(counts.shape[0])
    k = min(k, n)
    if k == 0:
        return np.zeros(0, np.int64)
    hist = _host(xp, xp.bincount(counts))
    c = hist.shape[0] - 1 - int(np.searchsorted(np.cumsum(hist[::-1]), k))  # the k-th highest count
    over = _host(xp, xp.flatnonzero(counts > c))
    over = over[np.lexsort((over, -_host(xp, counts[xp.asarray(over)]).astype(np.int64)))]
    at = _host(xp, xp.flatnonzero(counts == c)[: k - over.shape[0]])
    return np.concatenate([over, at]).astype(np.int64)


def _host(xp: Any, a: Any) -> np.ndarray:
    return a if xp is np else xp.asnumpy(a)
