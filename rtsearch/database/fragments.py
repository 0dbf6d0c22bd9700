"""Theoretical fragments and the fragment-ion index (after Sage and MSFragger).

Layout of the index, built by `build_fragment_index`::

    peptides (forms), sorted by neutral mass; a peptide's index is its rank
      p0  p1  p2  ...                                    pN-1
      |---- one spectrum's precursor window: [lo, hi) ----|

    fragments: every b/y ion (1+, b2.., y2..) of every peptide in
    [fragment_min_mz, fragment_max_mz], sorted by m/z and cut into buckets
    of B entries; inside a bucket the entries are re-sorted by peptide index

      bucket 0               bucket 1               bucket 2
     +----------------------+----------------------+---------------
     | pep: 3 17 17 42 ...  | pep: 0 5 9 9 ...     | ...
     | mz : (any order in   | mz : all >= max m/z  |
     |       the bucket)    |      of bucket 0     |
     +----------------------+----------------------+---------------
     bucket_min_mz[k] = smallest m/z of bucket k (ascending in k)

A query peak m with tolerance t visits the buckets that can hold m/z in
[m-t, m+t] (two binary searches in ``bucket_min_mz``); in each it binary
searches the peptide window [lo, hi) and counts the entries whose m/z is in
range. Memory: 8 bytes a fragment (float32 m/z + uint32 peptide).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.database.mods import ModSet
from rtsearch.database.peptides import Bases, Forms
from rtsearch.types import H2O, PROTON

MIN_ION_INDEX = 2  # b1 and y1 are rarely seen and mostly below the m/z floor


def residue_masses(
    bases: Bases, forms: Forms, residue_mass: np.ndarray, mods: ModSet
) -> tuple[np.ndarray, np.ndarray]:
    """Per-residue masses of each form, fixed and variable mods applied.

    Returns
    -------
    masses : float64 array, all forms concatenated
    offsets : int64 array [len(forms) + 1]
    """
    lengths = bases.lengths[forms.base]
    offsets = np.zeros(len(forms) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    within = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    src = np.repeat(bases.offsets[:-1][forms.base], lengths) + within
    masses = residue_mass[bases.residues[src]]
    n_fixed, c_fixed = mods.terminal_fixed()
    if n_fixed:
        masses[offsets[:-1]] += n_fixed
    if c_fixed:
        masses[offsets[1:] - 1] += c_fixed
    deltas = np.array([m.delta for m in mods.variable] or [0.0])
    for k in range(forms.mod_pos.shape[1]):
        pos = forms.mod_pos[:, k].astype(np.int64)
        ok = pos >= 0
        masses[offsets[:-1][ok] + pos[ok]] += deltas[forms.mod_id[ok, k]]
    return masses, offsets


def by_ions(masses: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Singly charged b and y ion m/z of every form.

    Returns ``(b, y, ion_offsets)``: for form f, ``b[s:e]`` holds b1..b(L-1)
    and ``y[s:e]`` y1..y(L-1), where ``s, e = ion_offsets[f], ion_offsets[f+1]``.
    """
    lengths = np.diff(offsets)
    prefix = np.cumsum(masses)
    start_sum = np.concatenate(([0.0], prefix))[offsets[:-1]]
    total = np.add.reduceat(masses, offsets[:-1]) if masses.size else np.zeros(0)
    # Position i (0-based) within a form, for i in 0 .. L-2: b(i+1) = sum(m[0..i]).
    keep = np.ones(masses.shape[0], dtype=bool)
    keep[offsets[1:] - 1] = False
    ion_len = lengths - 1
    ion_off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(ion_len, out=ion_off[1:])
    form_of = np.repeat(np.arange(len(lengths)), ion_len)
    b_neutral = prefix[keep] - start_sum[form_of]
    b = b_neutral + PROTON
    # y(L-1-i) = total - b_neutral(i+1) ; reverse inside each form to order y1..y(L-1)
    y_rev = total[form_of] - b_neutral + H2O + PROTON
    within = np.arange(ion_off[-1]) - ion_off[:-1][form_of]
    y = y_rev[ion_off[:-1][form_of] + (ion_len[form_of] - 1 - within)]
    return b, y, ion_off


@dataclass
class FragmentIndex:
    """Fragments bucketed by m/z, sorted by peptide inside a bucket."""

    mz: np.ndarray  # float32 [M]
    peptide: np.ndarray  # uint32 [M]
    bucket_min_mz: np.ndarray  # float32 [ceil(M / B)]
    bucket_size: int

    @property
    def nbytes(self) -> int:
        return int(self.mz.nbytes + self.peptide.nbytes + self.bucket_min_mz.nbytes)


def _index_fragments(
    bases: Bases, forms: Forms, residue_mass: np.ndarray, mods: ModSet, lo: float, hi: float, first: int
) -> tuple[np.ndarray, np.ndarray]:
    masses, offsets = residue_masses(bases, forms, residue_mass, mods)
    b, y, ion_off = by_ions(masses, offsets)
    n_ions = np.diff(ion_off)
    form_of = np.repeat(np.arange(len(forms), dtype=np.int64), n_ions)
    within = np.arange(ion_off[-1]) - ion_off[:-1][form_of]
    ok_index = within >= MIN_ION_INDEX - 1
    mz = np.concatenate((b[ok_index], y[ok_index]))
    pep = np.concatenate((form_of[ok_index], form_of[ok_index])) + first
    ok = (mz >= lo) & (mz <= hi)
    return mz[ok].astype(np.float32), pep[ok].astype(np.uint32)


def build_fragment_index(
    bases: Bases,
    forms: Forms,
    residue_mass: np.ndarray,
    mods: ModSet,
    *,
    min_mz: float,
    max_mz: float,
    bucket_size: int,
    xp: object = np,
    chunk: int = 500_000,
    progress: Callable[[int], None] | None = None,
) -> FragmentIndex:
    """Build the fragment index of mass-sorted ``forms`` (see the module diagram).

    ``xp`` (NumPy or CuPy) does the two sorts, the costly part on large databases.
    """
    mzs, peps = [], []
    for start in range(0, len(forms), chunk):
        part = forms.take(np.arange(start, min(start + chunk, len(forms))))
        mz, pep = _index_fragments(bases, part, residue_mass, mods, min_mz, max_mz, start)
        mzs.append(mz)
        peps.append(pep)
        if progress is not None:
            progress(len(part))
    mz = np.concatenate(mzs) if mzs else np.zeros(0, np.float32)
    pep = np.concatenate(peps) if peps else np.zeros(0, np.uint32)
    del mzs, peps
    mz_s, pep_s, bucket_min = _bucket_sort(mz, pep, bucket_size, xp)
    return FragmentIndex(mz_s, pep_s, bucket_min, bucket_size)


def _bucket_sort(
    mz: np.ndarray, pep: np.ndarray, bucket: int, xp: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort by m/z, then by peptide inside each bucket; also each bucket's smallest m/z.

    Both sorts are of packed 64-bit keys (a positive float32's bits order like
    the float), which is several times faster than argsort plus gathers.
    """
    x: Any = xp
    bits = x.asarray(mz).view(x.uint32).astype(x.uint64)
    key = (bits << x.uint64(32)) | x.asarray(pep).astype(x.uint64)
    del bits
    key.sort()
    bucket_min = (key[::bucket] >> x.uint64(32)).astype(x.uint32).view(x.float32)
    n = int(key.shape[0])
    n_full = (n // bucket) * bucket
    # swap halves: (peptide << 32 | m/z bits), sorted inside each bucket
    swapped = (key << x.uint64(32)) | (key >> x.uint64(32))
    del key
    if n_full:
        swapped[:n_full].reshape(-1, bucket).sort(axis=1)
    if n > n_full:
        swapped[n_full:].sort()
    out_pep = (swapped >> x.uint64(32)).astype(x.uint32)
    out_mz = (swapped & x.uint64(0xFFFFFFFF)).astype(x.uint32).view(x.float32)
    del swapped
    if x is np:
        return out_mz, out_pep, bucket_min
    return out_mz.get(), out_pep.get(), bucket_min.get()
