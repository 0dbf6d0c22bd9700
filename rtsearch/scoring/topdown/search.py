"""Top-down search, NumPy reference: each spectrum's candidate proteoforms, aligned; its best PrSM.

Candidates (a simple MS-Filter): the N-terminal forms whose mass is within ``max_shifts`` × ``max_shift_mass``
(plus the precursor tolerance) of the precursor, ranked by the PRMs on their two diagonals — the N-terminal
one (shift 0) and the C-terminal one (the whole mass difference), which between them hold a path with one
shift — the ``candidates`` best aligned (`rtsearch.scoring.topdown.align`). A spectrum's PrSM is its best
alignment: highest score, then fewest shifts, then smallest mass difference; with several precursors (one
isolation window), the best over them.

Not yet: truncated proteoforms (a sub-sequence of a protein, as TopPIC's N-/C-terminal truncations and its
"diagonal" shifts), known PTM shifts, E-values. On the FLASHApp E. coli run (167 MS2 against its 4,426
proteins and their decoys), whole-protein forms with ≤ 1 shift give no PrSM at 1 % FDR (best scores 5–6
matched PRMs, targets and decoys alike), where TopPIC reports 3: those proteoforms are truncated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtsearch.proteoforms.database import ProteoformDatabase
from rtsearch.scoring.topdown.align import NONE, align
from rtsearch.scoring.topdown.prm import prm_masses
from rtsearch.types import DeconvolutedSpectrum


@dataclass(frozen=True)
class TopDownSettings:
    tolerance_da: float = 0.02  # fragment PRMs
    precursor_ppm: float = 15.0
    max_shifts: int = 1
    max_shift_mass: float = 500.0
    candidates: int = 20


@dataclass(frozen=True)
class PrSM:
    """A spectrum's best proteoform-spectrum match (``form`` -1: none)."""

    scan: int
    form: int
    score: int
    shifts: int
    mass_difference: float  # precursor mass - the form's mass (Da): the shifts' sum
    decoy: bool


def candidates(db: ProteoformDatabase, prm: np.ndarray, precursor: float, s: TopDownSettings) -> np.ndarray:
    """The forms to align against a spectrum's ``prm`` (see the module docstring), best first."""
    window = s.max_shifts * s.max_shift_mass + precursor * s.precursor_ppm * 1e-6
    forms = np.flatnonzero(np.abs(db.form_mass - precursor) <= window)
    if forms.size == 0:
        return forms
    scores = np.array([_diagonals(db.form_prefix(int(f)), prm, precursor - db.form_mass[f], s.tolerance_da)
                       for f in forms])  # fmt: skip
    order = np.lexsort((np.abs(db.form_mass[forms] - precursor), -scores))
    return forms[order[: s.candidates]]


def _diagonals(prefix: np.ndarray, prm: np.ndarray, total_shift: float, tol: float) -> int:
    """PRMs within ``tol`` of a prefix mass (shift 0) or of one plus ``total_shift`` (inner masses only)."""
    inner = prm[1:-1]
    near = _near(inner, prefix[1:-1], tol)
    if abs(total_shift) > tol:
        near |= _near(inner, prefix[1:-1] + total_shift, tol)
    return int(near.sum())


def _near(x: np.ndarray, sorted_ref: np.ndarray, tol: float) -> np.ndarray:
    """Whether each of ``x`` is within ``tol`` of some value of ``sorted_ref``."""
    if sorted_ref.size == 0:
        return np.zeros(x.shape[0], dtype=bool)
    k = np.clip(np.searchsorted(sorted_ref, x), 1, sorted_ref.size - 1) if sorted_ref.size > 1 else np.zeros(
        x.shape[0], np.int64)  # fmt: skip
    best = np.minimum(np.abs(sorted_ref[k] - x), np.abs(sorted_ref[np.maximum(k - 1, 0)] - x))
    return best <= tol


def search_spectrum(db: ProteoformDatabase, sp: DeconvolutedSpectrum, s: TopDownSettings) -> PrSM:
    """The spectrum's best PrSM over its precursors and their candidates (form -1 when none aligns)."""
    best = (NONE, 0, 0.0, -1)  # score, -shifts, -|mass difference|, form
    for p in sp.precursors:
        prm = prm_masses(sp.mass, p.mass, sp.activation, merge_within=s.tolerance_da)
        for f in candidates(db, prm, p.mass, s).tolist():
            score, shifts = align(prm, db.form_prefix(f), tolerance=s.tolerance_da, max_shifts=s.max_shifts,
                                  max_shift_mass=s.max_shift_mass,
                                  precursor_tolerance=p.mass * s.precursor_ppm * 1e-6).best  # fmt: skip
            if score > NONE:
                key = (score, -shifts, -abs(p.mass - db.form_mass[f]), f)
                best = max(best, key)
    score, neg_shifts, _, form = best
    if form < 0:
        return PrSM(sp.scan, -1, NONE, -1, 0.0, False)
    mass = next(p.mass for p in sp.precursors if abs(abs(p.mass - db.form_mass[form]) + best[2]) < 1e-9)
    decoy = bool(db.is_decoy[db.form_protein[form]])
    return PrSM(sp.scan, form, score, -neg_shifts, float(mass - db.form_mass[form]), decoy)

