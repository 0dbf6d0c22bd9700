"""The wire's rules for a spectrum's peaks (`rtsearch.wire`): m/z finite and ascending, intensities finite and not
negative — for one spectrum as `rtsearch.wire.decode` checks it, and for a chunk of many at once (the intake
process, `rtsearch.serve.chunks`) with the same reasons in the same order."""

from __future__ import annotations

import math

import numpy as np

PEAK_REASONS = (
    "m/z values are not ascending (or hold NaN)", "m/z values hold NaN or infinite values",
    "intensities hold NaN or infinite values", "negative intensities",
)  # reasons of the "peaks" code, in the order they are checked  # fmt: skip


def spectrum_problem(mz: np.ndarray, intensity: np.ndarray) -> str | None:
    """Why `rtsearch.wire.decode` refuses one spectrum's peaks (``None``: it does not); checked in this order."""
    n = len(mz)
    if not n:
        return None
    # NaN fails every comparison, so "ascending" also rejects NaN anywhere; then only the ends can be infinite
    if n > 1 and not bool((mz[1:] >= mz[:-1]).all()):
        return PEAK_REASONS[0]
    if not (math.isfinite(mz[0]) and math.isfinite(mz[-1])):
        return PEAK_REASONS[1]
    if not np.isfinite(intensity).all():  # (not a sum: +inf and -inf would make NumPy warn)
        return PEAK_REASONS[2]
    if float(intensity.min()) < 0:
        return PEAK_REASONS[3]
    return None


def _all_good(mz: np.ndarray, intensity: np.ndarray, hi: np.ndarray) -> bool:
    """Whether no spectrum of a chunk has a peak problem: every m/z finite and ascending within its spectrum, every
    intensity finite and not negative (NaN fails each comparison: it is never good)."""
    if not (np.isfinite(mz).all() and bool(intensity.min() >= 0) and bool(intensity.max() < np.inf)):
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
    ends = np.zeros(len(n), dtype=bool)
    some = n > 0
    ends[some] = ~(np.isfinite(mz[lo[some]]) & np.isfinite(mz[hi[some] - 1]))
    problems = np.select([not_ascending, ends, rows(~np.isfinite(intensity)), rows(intensity < 0)], [1, 2, 3, 4], 0)
    return [(int(i), PEAK_REASONS[int(problems[i]) - 1]) for i in np.flatnonzero(problems)]
