"""Peptide sequences → decoys → modified forms with their masses.

A *base* peptide is one unmodified sequence (target or decoy). A *form* is a
base plus a set of variable modifications; forms are what the index sorts by
mass and what spectra are matched against. Forms are enumerated for all bases
at once with array operations: bases are grouped by their number of variable
sites ``n`` and every group expands through the same table of site subsets.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from rtsearch.database.arrays import in_threads, row_chunks, take
from rtsearch.database.mods import CODE, ModSet
from rtsearch.types import H2O

# Sites per peptide above which only the first MAX_SITES are considered (a
# 40-residue peptide with Phospho@STY would otherwise expand into thousands).
MAX_SITES = 16
_SLOT_RESIDUE, _SLOT_NTERM, _SLOT_CTERM = 0, 1, 2

CODE_OF_BYTE = np.zeros(256, dtype=np.uint8)
for _aa, _code in CODE.items():
    CODE_OF_BYTE[ord(_aa)] = _code


@dataclass
class Bases:
    """Unmodified peptide sequences in CSR form (residue codes)."""

    residues: np.ndarray  # uint8 codes, all sequences concatenated
    offsets: np.ndarray  # int64 [n + 1]
    is_decoy: np.ndarray  # bool [n]
    protein_n_term: np.ndarray  # bool [n]
    protein_c_term: np.ndarray  # bool [n]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return int(self.is_decoy.shape[0])


def encode(seqs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate sequences into residue codes and CSR offsets."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    raw = np.frombuffer("".join(seqs).encode("ascii"), dtype=np.uint8)
    return CODE_OF_BYTE[raw], offsets


@dataclass
class Forms:
    """Modified forms: a base peptide plus up to K variable modifications."""

    base: np.ndarray  # uint32 [n]
    mod_pos: np.ndarray  # int16 [n, K], -1 = none
    mod_id: np.ndarray  # uint8 [n, K], index into ModSet.variable
    mass: np.ndarray  # float64 [n], neutral monoisotopic

    def __len__(self) -> int:
        return int(self.base.shape[0])

    def take(self, order: np.ndarray) -> Forms:
        return Forms(*take([self.base, self.mod_pos, self.mod_id, self.mass], order))


def _sites(bases: Bases, mods: ModSet) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every variable-mod site: (base, position, mod id, slot key), sorted by base."""
    res = bases.residues
    lengths = bases.lengths
    first = bases.offsets[:-1]
    last = bases.offsets[1:] - 1
    parts: list[tuple[np.ndarray, np.ndarray, int, int]] = []  # (bases, positions, mod id, slot kind)
    for m_id, mod in enumerate(mods.variable):
        table = np.zeros(256, dtype=bool)
        table[[CODE[a] for a in mod.residues]] = True
        if mod.kind == "residue":
            idx = np.flatnonzero(table[res])
            base_of = np.searchsorted(bases.offsets, idx, side="right") - 1
            parts.append((base_of, idx - bases.offsets[base_of], m_id, _SLOT_RESIDUE))
            continue
        at = first if "n-term" in mod.kind else last
        ok = np.ones(len(bases), dtype=bool) if not mod.residues else table[res[at]]
        if mod.kind == "protein n-term":
            ok &= bases.protein_n_term
        elif mod.kind == "protein c-term":
            ok &= bases.protein_c_term
        b = np.flatnonzero(ok)
        at_pos = np.zeros(b.shape[0], dtype=np.int64) if "n-term" in mod.kind else lengths[b] - 1
        slot_kind = _SLOT_NTERM if "n-term" in mod.kind else _SLOT_CTERM
        parts.append((b, at_pos, m_id, slot_kind))
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        return e, e, e, e
    base = np.concatenate([p[0] for p in parts])
    pos = np.concatenate([p[1] for p in parts])
    mid = np.concatenate([np.full(p[0].shape[0], p[2], dtype=np.int64) for p in parts])
    slot = np.concatenate([np.asarray(p[1]) * 3 + p[3] for p in parts])
    if len(parts) == 1:  # one modification's sites come sorted by base, then position (and never tie)
        return base, pos, mid, slot
    order = np.lexsort((pos, base))
    return base[order], pos[order], mid[order], slot[order]


def _subsets(n: int, k: int) -> np.ndarray:
    """All subsets of ``range(n)`` of size ``<= k`` as rows padded with -1."""
    rows = [
        list(c) + [-1] * (k - len(c)) for r in range(min(n, k) + 1) for c in itertools.combinations(range(n), r)
    ]
    return np.array(rows, dtype=np.int64).reshape(len(rows), k)


def _base_masses(bases: Bases, residue_mass: np.ndarray) -> np.ndarray:
    """Each base's residue masses summed (``np.add.reduceat`` per base, bases split over threads)."""
    out = np.zeros(len(bases))

    def part(lo: int, hi: int) -> Callable[[], None]:
        def run() -> None:
            if hi > lo:
                res = bases.residues[bases.offsets[lo] : bases.offsets[hi]]
                out[lo:hi] = np.add.reduceat(residue_mass[res], bases.offsets[lo:hi] - bases.offsets[lo])

        return run

    in_threads([part(lo, hi) for lo, hi in row_chunks(len(bases))])
    return out


def _forms_of(
    group: np.ndarray, n: int, k: int, starts: np.ndarray, sites: tuple[np.ndarray, np.ndarray, np.ndarray],
    base_mass: np.ndarray, deltas: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The forms of bases ``group``, each with ``n`` sites: (base, positions, mod ids, mass) in `enumerate_forms`'
    order (base by base, subsets in `_subsets`' order)."""
    s_pos, s_mid, s_slot = sites
    table = _subsets(n, k)  # [S, k]
    chosen = starts[group][:, None, None] + table[None, :, :]  # [g, S, k]
    valid = table[None, :, :] >= 0
    idx = np.where(valid, chosen, 0)
    if s_pos.shape[0]:
        pos = np.where(valid, s_pos[idx], -1)
        mid = np.where(valid, s_mid[idx], 0)
        slot = np.where(valid, s_slot[idx], -1)
    else:
        pos = np.full(idx.shape, -1, dtype=np.int64)
        mid = np.zeros(idx.shape, dtype=np.int64)
        slot = pos
    ok = np.ones(chosen.shape[:2], dtype=bool)
    for a in range(k):
        for b in range(a + 1, k):
            ok &= ~((slot[..., a] == slot[..., b]) & (slot[..., a] >= 0))
    mass = base_mass[group][:, None] + np.where(valid, deltas[mid], 0.0).sum(axis=2)
    g_idx, s_idx = np.nonzero(ok)
    return (group[g_idx].astype(np.uint32), pos[g_idx, s_idx].astype(np.int16), mid[g_idx, s_idx].astype(np.uint8),
            mass[g_idx, s_idx])  # fmt: skip


def enumerate_forms(bases: Bases, mods: ModSet, max_mods: int, residue_mass: np.ndarray) -> Forms:
    """Expand every base into its modified forms (the unmodified one included)."""
    k = max_mods if mods.variable else 0
    n_term_fixed, c_term_fixed = mods.terminal_fixed()
    base_mass = _base_masses(bases, residue_mass)
    base_mass = base_mass + H2O + n_term_fixed + c_term_fixed
    deltas = np.array([m.delta for m in mods.variable] or [0.0], dtype=np.float64)
    s_base, s_pos, s_mid, s_slot = _sites(bases, mods) if k else (np.zeros(0, np.int64),) * 4
    counts = np.bincount(s_base, minlength=len(bases)) if k else np.zeros(len(bases), np.int64)
    starts = np.zeros(len(bases) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    counts = np.minimum(counts, MAX_SITES)
    sites = (s_pos, s_mid, s_slot)
    # each count's bases in row chunks, on threads (NumPy leaves the GIL): the forms come out in the same order
    tasks = [partial(_forms_of, group[lo:hi], int(n), k, starts, sites, base_mass, deltas)
             for n in np.flatnonzero(np.bincount(counts)) for group in (np.flatnonzero(counts == n),)
             for lo, hi in row_chunks(group.shape[0])]  # fmt: skip
    done = in_threads(tasks)
    out_base, out_pos, out_mid, out_mass = ([d[j] for d in done] for j in range(4))
    if not out_base:
        return Forms(np.zeros(0, np.uint32), np.zeros((0, k), np.int16), np.zeros((0, k), np.uint8), np.zeros(0))
    return Forms(
        np.concatenate(out_base),
        np.concatenate(out_pos).reshape(-1 if k else sum(len(b) for b in out_base), k),
        np.concatenate(out_mid).reshape(-1 if k else sum(len(b) for b in out_base), k),
        np.concatenate(out_mass),
    )
