"""The wire's rules for a spectrum's peaks (`rtsearch.protocol.wire`): m/z ascending, within 0..`MAX_MZ`,
intensities finite and not negative — for one spectrum as `rtsearch.protocol.wire.decode` checks it, and for a chunk
of many at once (the intake process, `rtsearch.serve.intake.chunks`) with the same reasons in the same order."""

from __future__ import annotations

import math

import numpy as np

# m/z (Th) at most, of peaks and of a precursor. Singly protonated deconvoluted masses (top-down, docs/protocol.md) of
# the largest proteoforms measured intact are ~0.2 MDa, native complexes ~1 MDa; and it keeps every later stage's
# arithmetic in range: a spectral library bins m/z into int32 (floor(m/z / bin width), rtsearch/library/store.py),
# which overflows above 2**31 bin widths (wrapping to negative bins, an IndexError of the NumPy scorer), and 1e6 /
# 2**31 is a bin of 0.0005 Th, finer than any library's. Negative m/z bins the same way: refused too.
MAX_MZ = 1_000_000.0
PEAK_REASONS = (
    "m/z values are not ascending (or hold NaN)", "m/z values hold NaN or infinite values",
    f"m/z values must be within 0..{MAX_MZ:,.0f}", "intensities hold NaN or infinite values", "negative intensities",
)  # reasons of the "peaks" code, in the order they are checked  # fmt: skip


def spectrum_problem(mz: np.ndarray, intensity: np.ndarray) -> str | None:
    """Why `rtsearch.protocol.wire.decode` refuses one spectrum's peaks (``None``: it does not); checked in this
    order."""
    n = len(mz)
    if not n:
        return None
    # NaN fails every comparison, so "ascending" also rejects NaN anywhere; then only the ends can be out of range
    if n > 1 and not bool((mz[1:] >= mz[:-1]).all()):
        return PEAK_REASONS[0]
    lo, hi = float(mz[0]), float(mz[-1])
    if not (lo >= 0.0 and hi <= MAX_MZ):  # the usual spectrum: two comparisons, no call
        return PEAK_REASONS[1] if not (math.isfinite(lo) and math.isfinite(hi)) else PEAK_REASONS[2]
    if not np.isfinite(intensity).all():  # (not a sum: +inf and -inf would make NumPy warn)
        return PEAK_REASONS[3]
    if float(intensity.min()) < 0:
        return PEAK_REASONS[4]
    return None


def _all_good(mz: np.ndarray, intensity: np.ndarray, hi: np.ndarray) -> bool:
    """Whether no spectrum of a chunk has a peak problem: every m/z within 0..`MAX_MZ` and ascending within its
    spectrum, every intensity finite and not negative (NaN fails each comparison: it is never good)."""
    if not (bool(mz.min() >= 0.0) and bool(mz.max() <= MAX_MZ) and bool(intensity.min() >= 0)
            and bool(intensity.max() < np.inf)):  # fmt: skip
        return False
    falls = mz[1:] < mz[:-1]  # finite: "<" is "not >=" here
    # a fall counts only inside a spectrum; from one spectrum's last peak to the next one's first it is allowed
    falls[hi[(hi > 0) & (hi < len(mz))] - 1] = False
    return not falls.any()


def peak_problems(mz: np.ndarray, intensity: np.ndarray, offsets: np.ndarray) -> list[tuple[int, str]]:
    """The spectra whose peaks `decode` refuses, for many at once: ``(row, reason)`` pairs.

    Row ``i``'s peaks are ``[offsets[i], offsets[i + 1])`` of the concatenated arrays; each
    bad row gets the reason `decode` gives it (its checks, in its order), so checking a
    chunk this way answers exactly as checking message by message.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    if len(offsets) < 2 or int(offsets[-1]) == 0:
        return []
    if len(offsets) == 2:  # a lone spectrum's chunk (a few hundred a second): decode's own check, half the calls
        lo, hi = int(offsets[0]), int(offsets[1])
        why = spectrum_problem(mz[lo:hi], intensity[lo:hi])
        return [(0, why)] if why is not None else []
    if _all_good(mz, intensity, offsets[1:]):  # the usual chunk: a dozen NumPy calls, not the reasons' forty
        return []
    return _reasons(mz, intensity, offsets)


def _reasons(mz: np.ndarray, intensity: np.ndarray, offsets: np.ndarray) -> list[tuple[int, str]]:
    """`peak_problems` of a chunk with at least one: each bad row's reason, in decode's order of checks."""
    lo, hi = offsets[:-1], offsets[1:]
    n = hi - lo
    total = int(offsets[-1])

    def rows(flags: np.ndarray) -> np.ndarray:  # whether any flag falls in each row's peaks (flags are rare)
        hit = np.zeros(len(n), dtype=bool)
        hit[np.searchsorted(offsets, np.flatnonzero(flags), side="right") - 1] = True
        return hit

    # a pair (i, i + 1) inside one spectrum that is not ascending; pairs across spectra don't count
    bad_pair = np.zeros(total, dtype=bool)
    bad_pair[:-1] = ~(mz[1:] >= mz[:-1])
    bad_pair[hi[n > 0] - 1] = False  # the last peak of each spectrum starts no pair of it
    not_ascending = (n > 1) & rows(bad_pair)
    ends, outside = np.zeros(len(n), dtype=bool), np.zeros(len(n), dtype=bool)
    some = n > 0
    first, last = mz[lo[some]], mz[hi[some] - 1]
    ends[some] = ~(np.isfinite(first) & np.isfinite(last))
    outside[some] = ~((first >= 0.0) & (last <= MAX_MZ))  # ascending: the ends bound the rest
    problems = np.select([not_ascending, ends, outside, rows(~np.isfinite(intensity)), rows(intensity < 0)],
                         [1, 2, 3, 4, 5], 0)  # fmt: skip
    return [(int(i), PEAK_REASONS[int(problems[i]) - 1]) for i in np.flatnonzero(problems)]
