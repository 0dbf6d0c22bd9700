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

from rtsearch.types import PROTON

BIN_DA = 1.0


def bin_work(masses: np.ndarray, *, bin_da: float = BIN_DA, weights: np.ndarray | None = None
             ) -> tuple[np.ndarray, float]:  # fmt: skip
    """Candidates (or their ``weights``: bytes, say) per ``bin_da`` bin of the target's neutral ``masses`` (any
    order): (per bin, the first bin's lower edge in Da)."""
    m = np.asarray(masses, np.float64)
    ok = np.isfinite(m)
    m = m[ok]
    if m.size == 0:
        return np.zeros(1, np.int64), 0.0
    lo = float(np.floor(m.min() / bin_da) * bin_da)
    w = None if weights is None else np.asarray(weights, np.float64)[ok]
    return np.bincount(((m - lo) // bin_da).astype(np.int64), weights=w), lo


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


def serving_ranges(size: np.ndarray, start_da: float, cuts: np.ndarray, budget: float, *, pad_da: float = 0.0,
                   bin_da: float = BIN_DA) -> list[tuple[float, float]]:  # fmt: skip
    """Per piece of ``cuts``, the precursor masses (Da) its worker can score: the piece widened evenly on both sides
    to as much of the target's ``size`` (per bin from ``start_da``: bytes, say) as ``budget`` allows — the whole
    mass range when the whole target fits. A worker holds ``pad_da`` more on each side than it serves (the
    precursor window of a query at its edge: 200 Da windows made the slices 6-8 % larger than ``budget``), and
    that counts in its budget. `LiveCuts` moves the cuts within these ranges. Raises `ValueError` when a piece
    alone is over ``budget``."""
    n = len(cuts) + 1
    size = np.asarray(size, np.float64)
    total = float(size.sum())
    if budget >= total:
        return [(-np.inf, np.inf)] * n
    cum = np.concatenate([[0.0], np.cumsum(size)])
    edges = start_da + bin_da * np.arange(cum.size)
    bounds = np.concatenate([[-np.inf], np.asarray(cuts, np.float64), [np.inf]])

    def below(mass: np.ndarray) -> np.ndarray:  # the size below each mass
        return np.interp(np.clip(mass, edges[0], edges[-1]), edges, cum)

    first, last = below(bounds[:-1] - pad_da), below(bounds[1:] + pad_da)  # what each piece's worker must hold
    out = []
    for k in range(n):
        a, b = float(first[k]), float(last[k])
        if b - a > budget:
            raise ValueError(f"piece {k} ({bounds[k]:.0f}-{bounds[k + 1]:.0f} Da) is {b - a:.3g} of the target's "
                             f"{total:.3g}; a worker holds {budget:.3g}")  # fmt: skip
        spare = (budget - (b - a)) / 2
        lo, hi = a - spare, b + spare
        lo, hi = (0.0, budget) if lo < 0 else (total - budget, total) if hi > total else (lo, hi)
        out.append((-np.inf if lo <= 0 else float(np.interp(lo, cum, edges)) + pad_da,
                    np.inf if hi >= total else float(np.interp(hi, cum, edges)) - pad_da))  # fmt: skip
    return out


def piece_work(work: np.ndarray, start_da: float, cuts: np.ndarray, *, bin_da: float = BIN_DA) -> np.ndarray:
    """The work of each of the ``len(cuts) + 1`` pieces."""
    centres = start_da + bin_da * (np.arange(len(work)) + 0.5)
    return np.bincount(owners(centres, cuts), weights=np.asarray(work, np.float64), minlength=len(cuts) + 1)


def balance(per_piece: np.ndarray) -> float:
    """max / mean work of the pieces (1.0: perfectly even)."""
    p = np.asarray(per_piece, np.float64)
    return float(p.max() / p.mean()) if p.size and p.mean() > 0 else 1.0


class LiveCuts:
    """Equal-work cuts that follow the spectra a run sends.

    Li et al. cut by the target's candidates per Da alone, as if spectra came evenly over the mass range; a real
    run's precursors crowd a few hundred Da (the bench spectra: 1.9–3.7 × the mean work on the busiest of 2–8
    pieces cut that way, docs/history/RESULTS.md). Here a spectrum's work is the candidates its precursor windows meet
    (`add`'s ``work``; the target's candidates in its 1-Da bin when not given: at 20 ppm that leaves 1.18 × the
    mean work on the busier of 2 pieces, the window's width growing with the mass); every ``every`` spectra the
    cuts are made again from the work seen (halved each time: recent runs count most) plus the target's own work
    as a prior of weight ``prior``. Moving a cut moves no data: each cut stays within what the workers on either
    side of it hold (``serves``, per piece: `serving_ranges`; the whole mass range when every worker holds the
    whole target).
    """

    def __init__(self, work: np.ndarray, start_da: float, pieces: int, *, every: int = 300, prior: float = 0.05,
                 bin_da: float = BIN_DA) -> None:  # fmt: skip
        self.work = np.asarray(work, np.float64)
        self.start, self.pieces, self.every, self.prior, self.bin_da = start_da, pieces, every, prior, bin_da
        self.seen = np.zeros(self.work.shape[0])
        self.cuts = equal_work_cuts(self.work, start_da, pieces, bin_da=bin_da)
        self.wanted = self.cuts  # where the spectra would put the cuts, were the workers' memory no bound (`hold`)
        self.lowest = np.full(pieces - 1, -np.inf)  # each cut's bounds (`hold`)
        self.highest = np.full(pieces - 1, np.inf)
        self._since = 0

    def hold(self, serves: list[tuple[float, float]]) -> None:
        """Keep each cut where both of its pieces' workers can score: piece k's spectra within ``serves[k]``."""
        self.lowest = np.array([lo for lo, _ in serves[1:]], np.float64)
        self.highest = np.array([hi for _, hi in serves[:-1]], np.float64)
        self.cuts = np.clip(self.cuts, self.lowest, self.highest)

    def add(self, neutral_mass: np.ndarray, work: np.ndarray | None = None) -> bool:
        """Count the spectra at ``neutral_mass``, each of ``work`` (the candidates its windows meet; default: the
        target's in its bin); whether the cuts were made again."""
        b = np.clip(((np.asarray(neutral_mass) - self.start) // self.bin_da).astype(np.int64), 0, self.work.size - 1)
        self.seen += np.bincount(b, weights=self.work[b] if work is None else np.asarray(work, np.float64),
                                 minlength=self.seen.size)  # fmt: skip
        self._since += b.size
        if self._since < self.every or self.seen.sum() <= 0:
            return False
        total = self.seen / self.seen.sum() + self.prior * self.work / max(self.work.sum(), 1.0)
        self.wanted = equal_work_cuts(total, self.start, self.pieces, bin_da=self.bin_da)
        self.cuts = np.clip(self.wanted, self.lowest, self.highest)
        self.seen *= 0.5
        self._since = 0
        return True
