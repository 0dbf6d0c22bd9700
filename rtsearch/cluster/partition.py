"""Li et al.'s equal-work partition of the precursor-mass range, and which worker owns a spectrum.

Li et al. (GPU spectral dot-product scoring, multi-GPU algorithms 4–5): the master counts the work of each 1-Da
precursor bin — the target's candidates there — and cuts the mass range into N contiguous pieces of equal work,
each node's once for the run; per-spectrum work stealing is avoided because the cost is uneven (a spectrum at
1,105.5 Da has 3,157 candidates, one at 522.3 Da 23)::

    work per Da   ▁▂▅██▇▆▅▄▃▂▂▁▁▁
    cuts               |   |    |          N = 4: the cumulative work's quarters, at bin edges
    owners        0    1   2    3

A spectrum belongs to the piece holding its neutral precursor mass (its first charge; 2+ when unknown). Pure
NumPy: no I/O, no cluster (`rtsearch.cluster.door` routes by it).
"""

from __future__ import annotations

import numpy as np

PROTON = 1.007276466812
BIN_DA = 1.0


def bin_work(masses: np.ndarray, *, bin_da: float = BIN_DA) -> tuple[np.ndarray, float]:
    """Candidates per ``bin_da`` bin of the target's neutral ``masses`` (any order): (counts, the first bin's
    lower edge in Da)."""
    m = np.asarray(masses, np.float64)
    m = m[np.isfinite(m)]
    if m.size == 0:
        return np.zeros(1, np.int64), 0.0
    lo = float(np.floor(m.min() / bin_da) * bin_da)
    return np.bincount(((m - lo) // bin_da).astype(np.int64)), lo


def equal_work_cuts(work: np.ndarray, start_da: float, n: int, *, bin_da: float = BIN_DA) -> np.ndarray:
    """The ``n - 1`` cut masses (Da, at bin edges, ascending) splitting ``work`` (per bin from ``start_da``) into
    ``n`` contiguous pieces of as equal work as the bins allow: each cut at the edge where the cumulative work is
    nearest its share k / n."""
    if n < 1:
        raise ValueError("n must be at least 1")
    w = np.asarray(work, np.float64)
    cum = np.concatenate([[0.0], np.cumsum(w)])  # work below each bin edge
    total = cum[-1]
    edges: list[int] = []
    for k in range(1, n):
        goal = total * k / n
        i = int(np.searchsorted(cum, goal))
        i = i if i == 0 or abs(cum[min(i, cum.size - 1)] - goal) < abs(cum[i - 1] - goal) else i - 1  # ties: lower
        edges.append(min(max(i, edges[-1] if edges else 0), w.size))
    return start_da + bin_da * np.array(edges, np.float64)


def owners(neutral_mass: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Each mass's piece (0 … len(cuts)): the number of cuts at or below it."""
    return np.searchsorted(np.asarray(cuts, np.float64), np.asarray(neutral_mass, np.float64), side="right")


def spectrum_masses(precursor_mz: np.ndarray, charges: list[tuple[int, ...]], default_charge: int = 2) -> np.ndarray:
    """Each spectrum's neutral precursor mass at its first charge (``default_charge`` when none is known)."""
    z = np.array([c[0] if c else default_charge for c in charges], np.float64)
    return (np.asarray(precursor_mz, np.float64) - PROTON) * z


def piece_work(work: np.ndarray, start_da: float, cuts: np.ndarray, *, bin_da: float = BIN_DA) -> np.ndarray:
    """The work of each of the ``len(cuts) + 1`` pieces."""
    centres = start_da + bin_da * (np.arange(len(work)) + 0.5)
    return np.bincount(owners(centres, cuts), weights=np.asarray(work, np.float64), minlength=len(cuts) + 1)


def balance(per_piece: np.ndarray) -> float:
    """max / mean work of the pieces (1.0: perfectly even)."""
    p = np.asarray(per_piece, np.float64)
    return float(p.max() / p.mean()) if p.size and p.mean() > 0 else 1.0
