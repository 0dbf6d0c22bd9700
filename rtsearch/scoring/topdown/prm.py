"""A deconvoluted MS2 spectrum as prefix residue masses (PRMs), the spectrum side of spectral alignment.

Each neutral fragment mass f of a spectrum with precursor neutral mass M is read both ways (MS-Align+,
TopPIC): as an N-terminal ion, whose PRM is f less the ion type's offset, and as a C-terminal ion, whose
complement gives the PRM (M − H2O) − (f − its offset). CID and HCD: b (offset 0) and y (H2O); ETD, ECD and
EThcD: c (NH3) and z• (H2O − NH3 + H). The result is sorted, with 0 and M − H2O (the two ends) added.
"""

from __future__ import annotations

from typing import Any

import numpy as np

WATER = 18.010564684
AMMONIA = 17.026549101
HYDROGEN = 1.007825032
# per activation: (N-terminal ion offset, C-terminal ion offset) from the residue sums
_IONS = {"b/y": (0.0, WATER), "c/z": (AMMONIA, WATER - AMMONIA + HYDROGEN)}
_ELECTRON = ("ETD", "ECD", "ETHCD", "EXD")


def ion_pair(activation: str) -> str:
    """``"c/z"`` for electron-based activation, else ``"b/y"``."""
    return "c/z" if activation.upper() in _ELECTRON else "b/y"


def prm_masses(fragments: np.ndarray, precursor_mass: float, activation: str = "HCD", *,
               merge_within: float = 0.0) -> np.ndarray:  # fmt: skip
    """Sorted PRMs of ``fragments`` (neutral masses, Da) with the ends 0 and ``precursor_mass`` − H2O; those
    outside (0, M − H2O) are dropped, and PRMs within ``merge_within`` of the one before are merged into it (a b
    ion and a y ion of one cleavage give one PRM twice)."""
    n_off, c_off = _IONS[ion_pair(activation)]
    residues = precursor_mass - WATER
    f = np.asarray(fragments, dtype=np.float64)
    both = np.concatenate([f - n_off, residues - (f - c_off)])
    inner = np.sort(both[(both > 0) & (both < residues)])
    if merge_within > 0 and inner.size:
        inner = inner[np.r_[True, np.diff(inner) > merge_within]]
    return np.concatenate([[0.0], inner, [residues]])


def near(sorted_ref: Any, x: Any, tol: float, xp: Any = np) -> Any:
    """Whether each of ``x`` is within ``tol`` of some value of the ascending ``sorted_ref`` (NumPy or CuPy)."""
    if sorted_ref.shape[0] == 0:
        return xp.zeros(x.shape[0], dtype=bool)
    k = xp.searchsorted(sorted_ref, x)
    hi = xp.minimum(k, sorted_ref.shape[0] - 1)
    lo = xp.maximum(k - 1, 0)
    return xp.minimum(xp.abs(sorted_ref[hi] - x), xp.abs(sorted_ref[lo] - x)) <= tol
