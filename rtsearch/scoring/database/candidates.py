"""Candidate peptides of each query from the fragment index (NumPy reference).

A *query* is one spectrum at one precursor charge. Its candidates are the
peptides whose neutral mass is within the precursor tolerance of the
spectrum's mass minus an isotope error (0, 1, … × 1.00336 Da). Peptides are
sorted by mass, so all windows of a query fit in one index range [lo, hi).
For every peptide in that range the preliminary score is the number of
(peak, fragment) pairs within the fragment tolerance, counted through the
fragment index (see `rtsearch.database.fragments`); peptides outside every
isotope window are then dropped and the ``k`` best kept, ties going to the
lower peptide index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtsearch.database.fragments import FragmentIndex
from rtsearch.types import C13_DELTA, PROTON, Tolerance

# From this many queries their windows' bounds are looked up in mass order: a search through the 20,000-protein
# bench index's 5 M peptide masses (40 MB) in arrival order misses the cache at nearly every step, in mass order
# the next search walks where the last one did. `Engine.queries` of 512 / 2,048 / 4,096 bench spectra 0.44-1.25 ->
# 0.35-0.96, 5.3-6.6 -> 2.6-3.2, 8.1-9.9 -> 4.3-5.0 ms on the development machine, 256 alike (the since-deleted probe
# queries_probe.py).
SORTED_SEARCH_MIN = 512


@dataclass
class Queries:
    """Spectrum × charge pairs and their peptide index ranges."""

    spectrum: np.ndarray  # int64 [Q], row in the PeakBatch
    charge: np.ndarray  # int64 [Q]
    mass: np.ndarray  # float64 [Q], neutral precursor mass
    lo: np.ndarray  # int64 [Q], first peptide index of the merged window
    hi: np.ndarray  # int64 [Q], one past the last

    def __len__(self) -> int:
        return int(self.spectrum.shape[0])

    def take(self, rows: np.ndarray | slice) -> Queries:
        return Queries(self.spectrum[rows], self.charge[rows], self.mass[rows], self.lo[rows], self.hi[rows])

    def shifted(self, first: int) -> Queries:
        """The same queries with peptide numbers from ``first`` (a slice of a target: `PeptideIndex.slice`)."""
        return Queries(self.spectrum, self.charge, self.mass, self.lo + first, self.hi + first) if first else self


def make_queries(
    spectrum: np.ndarray,
    charge: np.ndarray,
    precursor_mz: np.ndarray,
    peptide_mass: np.ndarray,
    tolerance: Tolerance,
    isotope_errors: tuple[int, ...],
) -> Queries:
    """Compute each query's neutral mass and merged peptide window."""
    mass = (precursor_mz[spectrum] - PROTON) * charge
    width = np.asarray(tolerance.width(mass), dtype=np.float64)
    lo_mass = mass - max(isotope_errors) * C13_DELTA - width
    hi_mass = mass - min(isotope_errors) * C13_DELTA + width
    if mass.shape[0] < SORTED_SEARCH_MIN:
        lo = np.searchsorted(peptide_mass, lo_mass, side="left")
        hi = np.searchsorted(peptide_mass, hi_mass, side="right")
    else:  # the windows looked up in mass order (both bounds rise with the mass), each result put back in place
        order = np.argsort(mass, kind="stable")
        lo, hi = np.empty(mass.shape[0], np.intp), np.empty(mass.shape[0], np.intp)
        lo[order] = np.searchsorted(peptide_mass, lo_mass[order], side="left")
        hi[order] = np.searchsorted(peptide_mass, hi_mass[order], side="right")
    return Queries(spectrum.astype(np.int64), charge.astype(np.int64), mass, lo, hi)


def in_windows(
    query_mass: np.ndarray, peptide_mass: np.ndarray, tolerance: Tolerance, isotope_errors: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Whether each (query, peptide) pair is in an isotope window, and the smallest such error."""
    width = tolerance.width(query_mass)
    ok = np.zeros(query_mass.shape, dtype=bool)
    iso = np.zeros(query_mass.shape, dtype=np.int64)
    for e in sorted(isotope_errors, key=abs, reverse=True):
        hit = np.abs(query_mass - e * C13_DELTA - peptide_mass) <= width
        ok |= hit
        iso = np.where(hit, e, iso)
    return ok, iso


def count_matches(
    frag: FragmentIndex,
    peaks_mz: np.ndarray,
    n_peaks: np.ndarray,
    queries: Queries,
    tolerance: Tolerance,
) -> tuple[np.ndarray, np.ndarray]:
    """Matched-fragment counts of every peptide in every query window.

    Returns ``(counts, offsets)``: query q's counts for peptides lo..hi-1 are
    ``counts[offsets[q]:offsets[q+1]]``.
    """
    span = queries.hi - queries.lo
    offsets = np.zeros(len(queries) + 1, dtype=np.int64)
    np.cumsum(span, out=offsets[1:])
    counts = np.zeros(int(offsets[-1]), dtype=np.int32)
    npk = n_peaks[queries.spectrum].astype(np.int64)
    pq = np.repeat(np.arange(len(queries)), npk)  # (query, peak) pairs
    pk = np.arange(pq.shape[0]) - np.repeat(np.cumsum(npk) - npk, npk)
    pm = peaks_mz[queries.spectrum[pq], pk]
    tol = np.asarray(tolerance.width(pm), dtype=np.float64)
    bmin = frag.bucket_min_mz.astype(np.float64)
    b0 = np.maximum(np.searchsorted(bmin, pm - tol, side="left") - 1, 0)
    b1 = np.searchsorted(bmin, pm + tol, side="right")
    nb = b1 - b0
    tp = np.repeat(np.arange(pq.shape[0]), nb)  # (pair, bucket) triples
    tb = b0[tp] + (np.arange(tp.shape[0]) - np.repeat(np.cumsum(nb) - nb, nb))
    n_frag = frag.mz.shape[0]
    start = tb * frag.bucket_size
    end = np.minimum(start + frag.bucket_size, n_frag)
    lo = _lower_bound(frag.peptide, start, end, queries.lo[pq[tp]])
    hi = _lower_bound(frag.peptide, lo, end, queries.hi[pq[tp]])
    n_e = hi - lo
    te = np.repeat(np.arange(tp.shape[0]), n_e)  # entries
    pos = lo[te] + (np.arange(te.shape[0]) - np.repeat(np.cumsum(n_e) - n_e, n_e))
    fmz = frag.mz[pos].astype(np.float64)
    pair = tp[te]
    hit = np.abs(fmz - pm[pair]) <= tol[pair]
    q = pq[pair[hit]]
    slot = offsets[q] + frag.peptide[pos[hit]].astype(np.int64) - queries.lo[q]
    counts += np.bincount(slot, minlength=counts.shape[0]).astype(np.int32)
    return counts, offsets


def _lower_bound(keys: np.ndarray, start: np.ndarray, end: np.ndarray, value: np.ndarray) -> np.ndarray:
    """First position in ``keys[start:end]`` whose key is ``>= value``, element-wise."""
    lo, hi = start.copy(), end.copy()
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        less = np.zeros(lo.shape, dtype=bool)
        less[active] = keys[mid[active]] < value[active]
        lo = np.where(active & less, mid + 1, lo)
        hi = np.where(active & ~less, mid, hi)


def top_candidates(
    counts: np.ndarray,
    offsets: np.ndarray,
    queries: Queries,
    peptide_mass: np.ndarray,
    tolerance: Tolerance,
    isotope_errors: tuple[int, ...],
    *,
    k: int,
    min_count: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best peptides of each query: ``(peptide [Q, k], count [Q, k])``, -1/0 padded.

    Order: count descending, then peptide index ascending.
    """
    q_of = np.repeat(np.arange(len(queries)), np.diff(offsets))
    pep = queries.lo[q_of] + (np.arange(q_of.shape[0]) - offsets[q_of])
    ok, _ = in_windows(queries.mass[q_of], peptide_mass[pep], tolerance, isotope_errors)
    keep = ok & (counts >= min_count)
    q_of, pep, cnt = q_of[keep], pep[keep], counts[keep].astype(np.int64)
    order = np.lexsort((pep, -cnt, q_of))
    q_of, pep, cnt = q_of[order], pep[order], cnt[order]
    first = np.searchsorted(q_of, np.arange(len(queries)), side="left")
    rank = np.arange(q_of.shape[0]) - first[q_of]
    sel = rank < k
    out_pep = np.full((len(queries), k), -1, dtype=np.int64)
    out_cnt = np.zeros((len(queries), k), dtype=np.int32)
    out_pep[q_of[sel], rank[sel]] = pep[sel]
    out_cnt[q_of[sel], rank[sel]] = cnt[sel]
    return out_pep, out_cnt


def candidates_numpy(
    frag: FragmentIndex,
    peptide_mass: np.ndarray,
    peaks_mz: np.ndarray,
    n_peaks: np.ndarray,
    queries: Queries,
    *,
    precursor_tolerance: Tolerance,
    fragment_tolerance: Tolerance,
    isotope_errors: tuple[int, ...],
    k: int,
    min_count: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Count, mask and select in one call (the NumPy reference of the GPU kernel)."""
    counts, offsets = count_matches(frag, peaks_mz, n_peaks, queries, fragment_tolerance)
    return top_candidates(
        counts, offsets, queries, peptide_mass, precursor_tolerance, isotope_errors, k=k, min_count=min_count
    )


