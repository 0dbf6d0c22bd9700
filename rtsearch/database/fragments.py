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

import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.database.mods import ModSet
from rtsearch.database.peptides import Bases, Forms
from rtsearch.types import H2O, PROTON

MIN_ION_INDEX = 2  # b1 and y1 are rarely seen and mostly below the m/z floor
# NumPy sorts on one core (releasing the GIL): above this many keys the host's sorts run in parts on threads, then
# one merge of the sorted runs (52 M keys on 2 cores: 4.0 s whole, 1.9 s in halves + 0.3 s merging)
PARALLEL_SORT_MIN = 4_000_000


def residue_masses(
    bases: Bases, forms: Forms, residue_mass: np.ndarray, mods: ModSet, xp: Any = np
) -> tuple[Any, Any]:
    """Per-residue masses of each form, fixed and variable mods applied (arrays of ``xp``).

    Returns
    -------
    masses : float64 array, all forms concatenated
    offsets : int64 array [len(forms) + 1]
    """
    base = xp.asarray(forms.base).astype(xp.int64)
    base_offsets = xp.asarray(bases.offsets)
    lengths = base_offsets[base + 1] - base_offsets[base]
    offsets = xp.zeros(len(forms) + 1, dtype=xp.int64)
    xp.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    form_of = _segments(lengths, xp)
    within = xp.arange(total, dtype=xp.int64) - offsets[:-1][form_of]
    src = base_offsets[base][form_of] + within
    masses = xp.asarray(residue_mass)[xp.asarray(bases.residues)[src]]
    n_fixed, c_fixed = mods.terminal_fixed()
    if n_fixed:
        masses[offsets[:-1]] += n_fixed
    if c_fixed:
        masses[offsets[1:] - 1] += c_fixed
    deltas = xp.asarray([m.delta for m in mods.variable] or [0.0], dtype=xp.float64)
    mod_pos, mod_id = xp.asarray(forms.mod_pos), xp.asarray(forms.mod_id)
    for k in range(forms.mod_pos.shape[1]):
        pos = mod_pos[:, k].astype(xp.int64)
        ok = pos >= 0
        masses[offsets[:-1][ok] + pos[ok]] += deltas[mod_id[ok, k].astype(xp.int64)]
    return masses, offsets


def by_ions(masses: Any, offsets: Any, xp: Any = np) -> tuple[Any, Any, Any]:
    """Singly charged b and y ion m/z of every form (arrays of ``xp``).

    Returns ``(b, y, ion_offsets)``: for form f, ``b[s:e]`` holds b1..b(L-1)
    and ``y[s:e]`` y1..y(L-1), where ``s, e = ion_offsets[f], ion_offsets[f+1]``.

    Each form's residues are summed in order, position by position over all forms at once, so NumPy and CuPy
    add the same numbers in the same order and give the same bits (a cumulative sum over the whole chunk, as
    before, lost up to 1e-7 Da to cancellation and cannot be reproduced by a parallel scan).
    """
    lengths = offsets[1:] - offsets[:-1]
    prefix = masses.copy()  # prefix[offsets[f] + i] = m0 + m1 + ... + mi of form f, added left to right
    longest = int(lengths.max()) if len(lengths) else 0
    for i in range(1, longest):
        at = offsets[:-1][lengths > i] + i
        prefix[at] = prefix[at - 1] + prefix[at]
    total = prefix[offsets[1:] - 1] if len(lengths) else xp.zeros(0)
    ion_len = lengths - 1
    ion_off = xp.zeros(len(lengths) + 1, dtype=xp.int64)
    xp.cumsum(ion_len, out=ion_off[1:])
    form_of = _segments(ion_len, xp)
    within = xp.arange(int(ion_off[-1]), dtype=xp.int64) - ion_off[:-1][form_of]
    # ion i (0-based, i <= L-2) of a form: b(i+1) = sum(m[0..i]); y(L-1-i) = total - b(i+1)
    b_neutral = prefix[offsets[:-1][form_of] + within]
    b = b_neutral + PROTON
    y_rev = total[form_of] - b_neutral + H2O + PROTON
    y = y_rev[ion_off[:-1][form_of] + (ion_len[form_of] - 1 - within)]  # reversed inside each form: y1..y(L-1)
    return b, y, ion_off


def _segments(counts: Any, xp: Any) -> Any:
    """``repeat(arange(len(counts)), counts)``: the segment of each element (CuPy's ``repeat`` takes no array of
    counts)."""
    if xp is np:
        return np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    ends = xp.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    return xp.searchsorted(ends, xp.arange(total, dtype=xp.int64), side="right").astype(xp.int64)


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
    bases: Bases, forms: Forms, residue_mass: np.ndarray, mods: ModSet, lo: float, hi: float, first: int,
    xp: Any = np,
) -> tuple[Any, Any]:
    """The fragments of ``forms`` (their peptide numbers from ``first``) within [lo, hi]: m/z float32, peptide
    uint32, arrays of ``xp``."""
    masses, offsets = residue_masses(bases, forms, residue_mass, mods, xp)
    b, y, ion_off = by_ions(masses, offsets, xp)
    form_of = _segments(ion_off[1:] - ion_off[:-1], xp)
    within = xp.arange(int(ion_off[-1]), dtype=xp.int64) - ion_off[:-1][form_of]
    ok_index = within >= MIN_ION_INDEX - 1
    mz = xp.concatenate((b[ok_index], y[ok_index]))
    pep = xp.concatenate((form_of[ok_index], form_of[ok_index])) + first
    ok = (mz >= lo) & (mz <= hi)
    return mz[ok].astype(xp.float32), pep[ok].astype(xp.uint32)


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

    ``xp`` (NumPy or CuPy) computes the fragments and does the two sorts; the result is the same bytes with
    either (tests/gpu/test_index_build.py).
    """
    x: Any = xp
    mzs, peps = [], []
    starts = range(0, len(forms), chunk)

    def one(start: int) -> tuple[Any, Any, int]:
        part = forms.take(np.arange(start, min(start + chunk, len(forms))))
        return (*_index_fragments(bases, part, residue_mass, mods, min_mz, max_mz, start, x), len(part))

    # on the host, chunks side by side on threads (NumPy's array work releases the GIL); in order either way
    k = min(_cores(x), len(starts), 4)  # at most 4 chunks' temporaries at once
    with ThreadPoolExecutor(max(k, 1)) as pool:
        for mz, pep, n in pool.map(one, starts) if k > 1 else map(one, starts):
            mzs.append(mz)
            peps.append(pep)
            if progress is not None:
                progress(n)
    mz = x.concatenate(mzs) if mzs else x.zeros(0, x.float32)
    pep = x.concatenate(peps) if peps else x.zeros(0, x.uint32)
    del mzs, peps
    mz_s, pep_s, bucket_min = _bucket_sort(mz, pep, bucket_size, x)
    return FragmentIndex(mz_s, pep_s, bucket_min, bucket_size)


def slice_fragments(frag: FragmentIndex, first: int, last: int, xp: object = np) -> FragmentIndex:
    """The fragment index of peptides ``first .. last - 1`` alone, numbered from 0: what one partition worker of a
    cluster holds (`rtsearch.database.index.PeptideIndex.slice`).

    The kept entries are sorted and bucketed again (`_bucket_sort`), so the slice is the index
    `build_fragment_index` would build of those peptides: same candidates, same order, same ties.
    """
    pep = np.asarray(frag.peptide)
    keep = np.flatnonzero((pep >= first) & (pep < last))
    mz = np.asarray(frag.mz)[keep]
    local = (pep[keep] - np.uint32(first)).astype(np.uint32)
    mz_s, pep_s, bucket_min = _bucket_sort(mz, local, frag.bucket_size, xp)
    return FragmentIndex(mz_s, pep_s, bucket_min, frag.bucket_size)


def _bucket_sort(
    mz: np.ndarray, pep: np.ndarray, bucket: int, xp: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort by m/z, then by peptide inside each bucket; also each bucket's smallest m/z.

    Both sorts are of packed 64-bit keys (a positive float32's bits order like
    the float), which is several times faster than argsort plus gathers.
    """
    x: Any = xp
    key = _pack(x.asarray(mz).view(x.uint32), x.asarray(pep).astype(x.uint32, copy=False), x)
    _sort(key, x)
    bucket_min = (key[::bucket] >> x.uint64(32)).astype(x.uint32).view(x.float32)
    n = int(key.shape[0])
    n_full = (n // bucket) * bucket
    # swap halves: (peptide << 32 | m/z bits), sorted inside each bucket
    mz_bits, peps = _halves(key, x)
    del key
    swapped = _pack(peps, mz_bits, x)
    del mz_bits, peps
    if n_full:
        _sort_rows(swapped[:n_full].reshape(-1, bucket), x)
    if n > n_full:
        swapped[n_full:].sort()
    pep_s, mz_s = _halves(swapped, x)
    del swapped
    out_mz = mz_s.view(x.float32)
    if x is np:
        return out_mz, pep_s, bucket_min
    return out_mz.get(), pep_s.get(), bucket_min.get()


# the host writes and reads a 64-bit key's two 32-bit words in place (little-endian: the low word first), where
# shifts and masks made four whole-array temporaries each way
_WORDS = sys.byteorder == "little"


def _pack(hi: Any, lo: Any, xp: Any) -> Any:
    """uint64 keys ``hi << 32 | lo`` from two uint32 arrays."""
    if xp is np and _WORDS:
        key = np.empty(hi.shape[0], np.uint64)
        words = key.view(np.uint32).reshape(-1, 2)
        words[:, 1], words[:, 0] = hi, lo
        return key
    return (hi.astype(xp.uint64) << xp.uint64(32)) | lo.astype(xp.uint64)


def _halves(key: Any, xp: Any) -> tuple[Any, Any]:
    """(the high, the low 32 bits) of uint64 ``key``, as uint32 arrays."""
    if xp is np and _WORDS:
        words = key.view(np.uint32).reshape(-1, 2)
        return np.ascontiguousarray(words[:, 1]), np.ascontiguousarray(words[:, 0])
    return (key >> xp.uint64(32)).astype(xp.uint32), (key & xp.uint64(0xFFFFFFFF)).astype(xp.uint32)


def _cores(xp: Any) -> int:
    """Threads for host array work: the cores this process may use, at most 8 (1 for a device's arrays)."""
    return max(1, min(len(os.sched_getaffinity(0)), 8)) if xp is np else 1


def _threads(n: int, xp: Any) -> int:
    """Threads for a sort of ``n`` keys (1: the device's sort, or too few keys to pay)."""
    return 1 if n < PARALLEL_SORT_MIN else _cores(xp)


def _sort(key: Any, xp: Any) -> None:
    """Sort ``key`` in place: on the host, in parts on threads, then merged (a stable sort of sorted runs is one
    merge pass); the same array as one sort (equal keys are equal values)."""
    k = _threads(int(key.shape[0]), xp)
    if k == 1:
        key.sort()
        return
    parts = np.array_split(key, k)  # views: each sorted in place
    with ThreadPoolExecutor(k) as pool:
        list(pool.map(np.ndarray.sort, parts))
    key.sort(kind="stable")


def _sort_rows(rows: Any, xp: Any) -> None:
    """Sort each row of ``rows`` (a view) in place; on the host, groups of rows on threads."""
    k = _threads(int(rows.size), xp)
    if k == 1:
        rows.sort(axis=1)
        return
    with ThreadPoolExecutor(k) as pool:
        list(pool.map(lambda part: part.sort(axis=1), np.array_split(rows, k)))

