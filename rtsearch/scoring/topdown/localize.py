"""Where one mass shift sits: the residues of a proteoform that the spectrum's PRMs allow it on, and its name.

With one shift of δ on residue r, prefix masses P_1 … P_{r−1} stay on the diagonal of shift 0 and P_r …
P_{n−1} move to the diagonal of δ. Each split r (1 … n) explains the PRMs near P_j (j < r) and near P_j + δ
(j ≥ r); the residues whose splits explain the most are the shift's range (MS-Align+ and TopPIC report such a
range). Spectra with few fragments leave it wide: a shift with no fragment on either side of it is anywhere.
`name` gives a known PTM (`rtsearch.proteoforms.database.KnownShifts`) whose mass is δ's and whose residue lies in
the range, so ``[+79.9663]`` between S and T reads ``[Phospho]``.
"""

from __future__ import annotations

import numpy as np

from rtsearch.proteoforms.database import KnownShifts
from rtsearch.scoring.topdown.prm import near


def localize(prefix: np.ndarray, prm: np.ndarray, shift: float, tol: float) -> tuple[int, int]:
    """The first and last residue (0-based, within the proteoform of prefix masses ``prefix``, P_0 = 0 first) that
    one ``shift`` (Da) may sit on, given the spectrum's ``prm`` (ends included) within ``tol``."""
    inner = np.sort(prm[1:-1])
    a = near(inner, prefix[1:-1], tol).astype(np.int64)  # P_j, j = 1 … n−1, explained unshifted
    b = near(inner, prefix[1:-1] + shift, tol).astype(np.int64)  # … shifted
    before = np.r_[0, np.cumsum(a)]  # before[r − 1]: a_1 … a_{r−1}
    after = b.sum() - np.r_[0, np.cumsum(b)]  # after[r − 1]: b_r … b_{n−1}
    score = before + after  # split r = 1 … n, at index r − 1
    best = np.flatnonzero(score == score.max())
    return int(best[0]), int(best[-1])


def name(known: KnownShifts, residues: np.ndarray, shift: float, tol: float) -> str:
    """The known PTM of mass ``shift`` (within ``tol``) that one of ``residues`` (codes) can carry, else ''."""
    for k in np.flatnonzero(np.abs(known.mass - shift) <= tol).tolist():
        if known.sites[k, residues].any():
            return known.names[k].split("@")[0]
    return ""
