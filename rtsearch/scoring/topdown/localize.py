"""Where one mass shift sits: the residues of a proteoform the spectrum's PRMs allow it on, how sure that is, and its
name.

With one shift of δ on residue r, prefix masses P_1 … P_{r−1} stay on the diagonal of shift 0 and P_r …
P_{n−1} move to the diagonal of δ. Each split r (1 … n) explains s_r of the PRMs: those near P_j (j < r) and
near P_j + δ (j ≥ r). TopPIC's MIScore (Kou et al., "Characterization of proteoforms with unknown
post-translational modifications using the MIScore", J. Proteome Res. 2016; TopPIC's `src/stat/local/`) turns
the counts into a probability for each residue: P(r) ∝ R^{s_r}, R = 23.1434 (TopPIC's likelihood ratio of a
fragment explained by the right site against a wrong one), over the residues the shift may sit on (all for an
unknown shift, those that carry it for a known PTM). The range reported runs from the first to the last residue
whose probability is above 0.15 (TopPIC's ``--miscore-threshold``), its score the sum of those residues'
probabilities; where no residue reaches 0.15 (a shift with no fragment near it, tied over many residues), the
range is the residues of the most explaining splits, its score again their probabilities' sum.

A known PTM (`rtsearch.proteoforms.database.KnownShifts`) of δ's mass names the shift when a residue that can carry
it explains as many PRMs as the best residue does, so ``[+79.9663]`` on S, T or Y reads ``[Phospho]`` and is
localized over those residues alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtsearch.proteoforms.database import KnownShifts
from rtsearch.scoring.topdown.prm import near

RATIO = 23.1434  # TopPIC's prob_ratio_ (src/stat/local/local_mng.hpp)
THRESHOLD = 0.15  # TopPIC's default --miscore-threshold


@dataclass(frozen=True, slots=True)
class Site:
    """One shift's residues: ``first`` … ``last`` (0-based in the proteoform), ``score`` (MIScore: the probability
    the shift is on one of them), ``name`` (a known PTM's, or '')."""

    first: int
    last: int
    score: float
    name: str = ""


def explained(prefix: np.ndarray, prm: np.ndarray, shift: float, tol: float) -> np.ndarray:
    """PRMs explained with ``shift`` on each residue (0-based) of the proteoform of prefix masses ``prefix`` (P_0 = 0
    first), given the spectrum's ``prm`` (ends included) within ``tol``."""
    inner = np.sort(prm[1:-1])
    a = near(inner, prefix[1:-1], tol).astype(np.int64)  # P_j, j = 1 … n−1, explained unshifted
    b = near(inner, prefix[1:-1] + shift, tol).astype(np.int64)  # … shifted
    before = np.r_[0, np.cumsum(a)]  # before[r − 1]: a_1 … a_{r−1}
    after = b.sum() - np.r_[0, np.cumsum(b)]  # after[r − 1]: b_r … b_{n−1}
    return before + after


def posteriors(counts: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    """P(shift on residue r) ∝ `RATIO` ** counts[r], over the ``allowed`` residues (all when None)."""
    ok = np.ones(counts.shape, bool) if allowed is None else np.asarray(allowed, bool)
    top = counts[ok].max()
    w = np.where(ok, np.power(RATIO, (counts - top).astype(np.float64)), 0.0)
    return w / w.sum()


def site_of(counts: np.ndarray, allowed: np.ndarray | None = None, name: str = "") -> Site:
    """The `Site` of a shift whose placements explain ``counts`` PRMs (see the module docstring)."""
    p = posteriors(counts, allowed)
    above = np.flatnonzero(p > THRESHOLD)
    if above.size == 0:
        ok = np.ones(counts.shape, bool) if allowed is None else np.asarray(allowed, bool)
        above = np.flatnonzero(ok & (counts == counts[ok].max()))
    return Site(int(above[0]), int(above[-1]), float(p[above].sum()), name)


def localize(prefix: np.ndarray, prm: np.ndarray, shift: float, tol: float, residues: np.ndarray,
             known: KnownShifts | None = None) -> Site:  # fmt: skip
    """Where one ``shift`` (Da) sits in the proteoform of prefix masses ``prefix`` and residue codes ``residues``,
    given the spectrum's ``prm`` within ``tol``; named (and placed on its residues) when a ``known`` PTM fits."""
    counts = explained(prefix, prm, shift, tol)
    if known is not None:
        best = counts.max()
        for k in np.flatnonzero(np.abs(known.mass - shift) <= tol).tolist():
            carries = known.sites[k, residues]
            if carries.any() and counts[carries].max() == best:
                return site_of(counts, carries, known.names[k].split("@")[0])
    return site_of(counts)
