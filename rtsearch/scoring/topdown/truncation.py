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

from rtsearch.proteoforms.database import ProteoformDatabase
from rtsearch.scoring.topdown.prm import near

GAP = 1.0e6  # Da between proteins laid end to end: more than any PRM
CHUNK_GPU, CHUNK_HOST = 16, 2  # PRMs whose diagonals one sorted search counts (`Positions.counts`)


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
        """Per position: inner PRMs on its N-terminal diagonal (as a start) and on its C-terminal one (as an end):
        one sorted search of (position + PRM) over all positions, `CHUNK_GPU` (`CHUNK_HOST`) PRMs at a time. (Counting
        by residue offsets instead — each position's difference to the one d on, against the sorted PRMs — was
        measured hardly faster on the host: 12.1 and 12.5 s against 12.5 and 16.4 s for two spectra, 2-core EPYC.)"""
        xp, g = self.xp, self.mass
        inner = np.asarray(prm[1:-1], np.float64)
        n_count = xp.zeros(g.shape[0], dtype=xp.int32)
        c_count = xp.zeros(g.shape[0], dtype=xp.int32)
        step = CHUNK_GPU if xp is not np else CHUNK_HOST  # PRMs a search: fewer launches, bounded scratch
        for lo in range(0, inner.shape[0], step):
            s = xp.asarray(inner[lo : lo + step])[:, None]
            rows = s.shape[0]
            n_count += near(g, (g[None, :] + s).ravel(), tol, xp).reshape(rows, -1).sum(axis=0, dtype=xp.int32)
            c_count += near(g, (g[None, :] - (m_res - s)).ravel(), tol, xp).reshape(rows, -1).sum(axis=0,
                                                                                                dtype=xp.int32)
        return n_count, c_count


def candidates(pos: Positions, prm: np.ndarray, m_res: float, *, tol: float, window: float, starts: int = 50,
               limit: int = 200) -> list[tuple[int, int, int]]:  # fmt: skip
    """(protein, a, b) sub-sequences whose mass is ``m_res`` within ``window`` Da, from the ``starts`` best starts
    and ends by their diagonal counts; at most ``limit``, by the two counts' sum."""
    xp = pos.xp
    n_count, c_count = pos.counts(prm, m_res, tol)
    n_host, c_host = _host(xp, n_count), _host(xp, c_count)
    g = pos.mass_host
    found: dict[tuple[int, int], int] = {}
    for a in _best(n_count, starts, xp).tolist():
        lo, hi = np.searchsorted(g, [g[a] + m_res - window, g[a] + m_res + window])
        for b in range(int(lo), int(hi)):
            if pos.protein[b] == pos.protein[a] and b > a:
                found[a, b] = int(n_host[a] + c_host[b])
    for b in _best(c_count, starts, xp).tolist():
        lo, hi = np.searchsorted(g, [g[b] - m_res - window, g[b] - m_res + window])
        for a in range(int(lo), int(hi)):
            if pos.protein[a] == pos.protein[b] and b > a:
                found[a, b] = int(n_host[a] + c_host[b])
    best = sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [(int(pos.protein[a]), int(a - pos.start[a]), int(b - pos.start[a])) for (a, b), _ in best]


ISOTOPE = 1.00235  # Da between isotopes of a protein's averagine (a deconvolution's precursor may be off by one)


def terminal(db: ProteoformDatabase, pos: Positions, m_res: float, *, tol: float,
             isotopes: tuple[int, ...] = (0, -1, 1)) -> list[tuple[int, int, int, int]]:  # fmt: skip
    """Terminal truncations whose mass is the precursor's (``m_res``, residues only, within ``tol`` after an
    isotope error of ``isotopes``): (protein, a, b, form) for every N-terminal form cut short at b (a prefix, form
    ≥ 0) and every protein's C-terminal piece from a (a suffix, form -1). TopPIC's zero-shift filter finds these by
    mass alone; the diagonals of `candidates` miss those with few fragments. One sorted search a protein end, on
    the positions' backend."""
    g, xp = pos.mass_host, pos.xp
    n = len(db.accessions)
    out: set[tuple[int, int, int, int]] = set()
    first = db.offsets[:-1] + np.arange(n)  # each protein's position 0 in ``g``
    last = db.offsets[1:] + np.arange(n)  # and its position n
    starts = first[db.form_protein] + db.form_start  # each form's first position
    for iso in isotopes:
        m = m_res + iso * ISOTOPE
        for suffix, target in ((True, g[last] - m), (False, g[starts] + m - db.form_delta)):
            bounds = xp.asarray(np.concatenate([target - tol, target + tol]))
            lo, hi = _host(xp, xp.searchsorted(pos.mass, bounds)).reshape(2, -1)
            hi = hi + (g[np.minimum(hi, g.shape[0] - 1)] == target + tol)  # side="right" at the upper bound
            for r in np.flatnonzero(hi > lo).tolist():
                k = r if suffix else int(db.form_protein[r])
                for at in range(int(lo[r]), int(hi[r])):
                    if not first[k] < at < last[k] or (not suffix and at <= starts[r]):
                        continue  # another protein's, or the whole protein (a complete form)
                    a, b = (at, last[k]) if suffix else (starts[r], at)
                    out.add((k, int(a - first[k]), int(b - first[k]), -1 if suffix else r))
    return sorted(out)


def _best(counts: Any, k: int, xp: Any = np) -> np.ndarray:
    """Positions of the ``k`` highest ``counts``, highest first, the lower position first among equals (a stable
    sort's first ``k``). One key a position, (max − count) << 32 | position, so no two are equal and either backend
    gives the same: sorted on the GPU, partitioned on the host (a partition of counts, mostly equal, took 64 ms)."""
    n = int(counts.shape[0])
    key = (counts.max() - counts).astype(xp.int64) << 32 | xp.arange(n, dtype=xp.int64)
    if xp is not np:
        return _host(xp, xp.sort(key)[:k]) & 0xFFFFFFFF
    return np.sort(np.partition(key, k - 1)[:k] if n > k else key) & 0xFFFFFFFF


def _host(xp: Any, a: Any) -> np.ndarray:
    return a if xp is np else xp.asnumpy(a)
