"""Generating-function p-values of PrSMs: how likely a random protein of the proteoform's mass scores as well.

TopPIC's E-values (Liu et al. 2012, "Protein identification using top-down spectra", MCP 11:M111.008524; Kim et
al.'s generating functions for MS-GF) count, by dynamic programming over prefix masses, the probability that a
random protein — residues drawn independently with the database's frequencies — of the precursor's mass has at
least the PrSM's score against the spectrum. Unlike a binomial of independent coincidences
(`rtsearch.scoring.topdown.evalue`), it knows which masses residue chains reach: a PRM where no chain of residues
lands is no chance match for a random protein, one on a common mass is. Here:

- masses are integers of a grid ``unit`` = `UNIT_SHARE` × the fragment tolerance (0.05 Da at 10 kDa), residue
  masses rounded to it; a prefix mass scores where a mark (a PRM, and with one shift δ also a PRM − δ: the
  C-terminal diagonal) lies within the tolerance of it;
- T[p, h], the probability that a random protein has a prefix of mass p with h marked prefixes (h saturating at the
  PrSM's score k), is T[0 or the N-terminal modification, 0] = 1 and T[p] = Σ_a f_a T[p − r_a], moved up one
  score where p is marked: rows are computed a smallest residue mass at a time, which depend only on earlier ones;
- the p-value is P(h = k | the protein's mass within the end tolerance): the end rows, before their own mark,
  k's share of their sum.

A PrSM with one shift is scored against both diagonals' marks at once (N-terminal PRMs and C-terminal ones moved
by the shift): a random protein's count on their union bounds what a one-shift alignment of it can score, so the
p-value is conservative. TopPIC instead adds shift layers and scales them by factors fitted to data.

Written here because no maintained library offers it: TopPIC's (C++) is inside its binaries, pyteomics and
pyOpenMS have no top-down E-values. On CuPy, `kernels.GENERATING_SOURCE`, a thread block a PrSM and a thread a
cell, gives the NumPy reference's values bit for bit (no fused multiply-add; each cell's residues summed in the same
order; tests/gpu).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.database.arrays import ranges
from rtsearch.scoring.backend import compiled_kernel
from rtsearch.scoring.topdown.evalue import LOG10_FLOOR
from rtsearch.scoring.topdown.kernels import GENERATING_SOURCE

UNIT_SHARE = 0.5  # the grid's unit as a share of the fragment tolerance
CHUNK = 4096  # rows the kernel computes between two synchronisations at most (a smallest residue mass, or fewer)
THREADS = 256
TABLE_BYTES = 1 << 30  # the rings of one launch at most


@dataclass(frozen=True)
class Residues:
    """The random protein's alphabet: distinct residue masses (Da) and their frequencies (summing to 1)."""

    mass: np.ndarray
    frequency: np.ndarray


@dataclass(frozen=True)
class Question:
    """One PrSM's: the masses its prefixes score at (``marks``, Da, any order), within ``tolerance`` (Da); the random
    protein's residue ``mass`` within ``end_tolerance``; its N-terminal modification's mass (``start``) and
    ``score``."""

    marks: np.ndarray
    tolerance: float
    mass: float
    end_tolerance: float
    start: float
    score: int


@dataclass(frozen=True)
class _Grid:
    """A question on the integer grid: residue steps, marked rows, the start row and the end rows [end_lo, last]."""

    steps: np.ndarray  # int64 per residue
    marked: np.ndarray  # sorted unique rows
    start: int
    end_lo: int
    last: int
    height: int  # scores 0 … k


def _grid(q: Question, residues: Residues) -> _Grid:
    unit = q.tolerance * UNIT_SHARE
    marks = np.asarray(q.marks, np.float64)
    lo, hi = np.ceil((marks - q.tolerance) / unit).astype(np.int64), np.floor((marks + q.tolerance) / unit)
    marked = np.unique(ranges(np.maximum(lo, 1), hi.astype(np.int64) + 1)[1])
    end = max(q.end_tolerance, unit / 2)
    steps = np.maximum(np.rint(residues.mass / unit).astype(np.int64), 1)
    return _Grid(steps, marked, max(int(np.rint(q.start / unit)), 0), int(np.ceil((q.mass - end) / unit)),
                 int(np.floor((q.mass + end) / unit)), q.score + 1)


def log10_pvalues(questions: Sequence[Question], residues: Residues, *, xp: Any = np) -> np.ndarray:
    """log10 of each PrSM's p-value (see the module docstring): 0 for a score below 1 or a mass below the start."""
    grids = [_grid(q, residues) for q in questions]
    ends = np.zeros((len(questions), max((g.height for g in grids), default=1)))
    go = [i for i, (q, g) in enumerate(zip(questions, grids, strict=True)) if q.score >= 1 and g.last > g.start]
    if go:
        picked = [grids[i] for i in go]
        rows = [_ends(g, residues) for g in picked] if xp is np else _ends_gpu(xp, picked, residues)
        for i, r in zip(go, rows, strict=True):
            ends[i, : r.shape[0]] = r
    out = np.zeros(len(questions))
    for i in go:
        k = grids[i].height - 1
        total = float(np.sum(ends[i, : k + 1]))
        if total > 0:  # else no protein of the grid has the mass: no evidence either way
            out[i] = max(float(np.log10(ends[i, k] / total)), LOG10_FLOOR) if ends[i, k] > 0 else LOG10_FLOOR
    return out


def _ends(g: _Grid, residues: Residues) -> np.ndarray:
    """The end rows' probabilities by score, summed in row order (the NumPy reference)."""
    f, r = residues.frequency, g.steps
    pad = int(r.max())
    table = np.zeros((pad + g.last + 1, g.height))  # row p at pad + p; rows below 0 stay zero
    table[pad + g.start, 0] = 1.0
    mark = np.zeros(g.last + 1, bool)
    mark[g.marked[g.marked <= g.last]] = True
    end = np.zeros(g.height)
    step = max(int(r.min()), 1)
    for lo in range(g.start + 1, g.last + 1, step):
        hi = min(lo + step, g.last + 1)
        acc = np.zeros((hi - lo, g.height))
        for a in range(r.shape[0]):
            acc += f[a] * table[pad + lo - r[a] : pad + hi - r[a]]
        for p in range(max(lo, g.end_lo), hi):
            end += acc[p - lo]
        m = mark[lo:hi]
        new = acc.copy()
        new[m, 0] = 0.0
        new[m, 1:] = acc[m, :-1]
        new[m, -1] = acc[m, -2] + acc[m, -1]
        table[pad + lo : pad + hi] = new
    return end


def _ends_gpu(cp: Any, grids: Sequence[_Grid], residues: Residues) -> list[np.ndarray]:
    """`_ends` of every grid on the device, as many at once as `TABLE_BYTES` of rings hold."""
    out: list[np.ndarray] = []
    size = np.array([(int(g.steps.max()) + min(max(int(g.steps.min()), 1), CHUNK)) * g.height * 8 for g in grids])
    first = 0
    while first < len(grids):
        last = first + max(int(np.searchsorted(np.cumsum(size[first:]), TABLE_BYTES, side="right")), 1)
        out += _ends_launch(cp, grids[first:last], residues)
        first = last
    return out


def _ends_launch(cp: Any, grids: Sequence[_Grid], residues: Residues) -> list[np.ndarray]:
    """`_ends` of ``grids`` in one launch: one thread block a grid, its table a ring of rows."""
    n = len(grids)
    steps = np.stack([g.steps for g in grids]).astype(np.int32)
    chunk = np.minimum(np.maximum(steps.min(axis=1), 1), CHUNK)
    ring = (steps.max(axis=1) + chunk).astype(np.int64)
    height = np.array([g.height for g in grids], np.int64)
    size = ring * height
    table_off = np.r_[0, np.cumsum(size)[:-1]]
    marked = [g.marked.astype(np.int32) for g in grids]
    mark_off = np.r_[0, np.cumsum([m.shape[0] for m in marked])].astype(np.int64)
    end_off = np.r_[0, np.cumsum(height)[:-1]].astype(np.int64)
    rows = np.array([(g.start, g.end_lo, g.last) for g in grids], np.int64)
    table = cp.zeros(int(size.sum()), dtype=cp.float64)
    end = cp.zeros(int(height.sum()), dtype=cp.float64)
    fn = compiled_kernel(cp, GENERATING_SOURCE, "generating_ends", ("--fmad=false",))
    args = (cp.asarray(steps), np.int32(steps.shape[1]), cp.asarray(residues.frequency.astype(np.float64)),
            cp.asarray(np.concatenate(marked) if marked else np.zeros(1, np.int32)), cp.asarray(mark_off),
            cp.asarray(rows), cp.asarray(chunk.astype(np.int32)), cp.asarray(ring), cp.asarray(height),
            cp.asarray(table_off.astype(np.int64)), table, cp.asarray(end_off), end)  # fmt: skip
    fn((n,), (THREADS,), args)
    flat = cp.asnumpy(end)
    return [flat[o : o + h] for o, h in zip(end_off.tolist(), height.tolist(), strict=True)]
