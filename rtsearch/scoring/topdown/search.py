"""Top-down search, NumPy reference: each spectrum's candidate proteoforms, aligned; its best PrSM.

Candidates (a simple MS-Filter): the N-terminal forms whose mass is within ``max_shifts`` × ``max_shift_mass``
(plus the precursor tolerance) of the precursor, ranked by the PRMs on their two diagonals — the N-terminal
one (shift 0) and the C-terminal one (the whole mass difference), which between them hold a path with one
shift — the ``candidates`` best aligned (`rtsearch.scoring.topdown.align`). A spectrum's PrSM is its best
alignment: highest score, then fewest shifts, then smallest mass difference; with several precursors (one
isolation window), the best over them.

With ``positions`` (`rtsearch.scoring.topdown.truncation.Positions`), truncated sub-sequences are candidates
too. On the FLASHApp E. coli run (167 MS2 against its 4,426 proteins and their decoys), whole-protein forms
alone with ≤ 1 shift gave no PrSM at 1 % FDR (best scores 5–6 matched PRMs, targets and decoys alike), where
TopPIC reports 3. Not yet: known PTM shifts, E-values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.proteoforms.database import ProteoformDatabase
from rtsearch.scoring.topdown.align import NONE, Alignment
from rtsearch.scoring.topdown.gpu import align_pairs
from rtsearch.scoring.topdown.prm import WATER, near, prm_masses
from rtsearch.scoring.topdown.truncation import Positions
from rtsearch.scoring.topdown.truncation import candidates as truncated
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
    """A spectrum's best proteoform-spectrum match (``protein`` -1: none): residues [start, end) of ``protein``,
    with N-terminal form ``form`` (-1: a truncated sub-sequence, no N-terminal modification)."""

    scan: int
    protein: int
    start: int
    end: int
    form: int
    score: int
    shifts: int
    mass_difference: float  # precursor mass - the proteoform's mass (Da): the shifts' sum
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
    hit = near(prefix[1:-1], inner, tol)
    if abs(total_shift) > tol:
        hit |= near(prefix[1:-1] + total_shift, inner, tol)
    return int(hit.sum())


def search_spectrum(db: ProteoformDatabase, sp: DeconvolutedSpectrum, s: TopDownSettings,
                    positions: Positions | None = None, *, xp: Any = np) -> PrSM:  # fmt: skip
    """The spectrum's best PrSM over its precursors and their candidates: whole N-terminal forms and, with
    ``positions``, truncated sub-sequences (`rtsearch.scoring.topdown.truncation`); protein -1 when none aligns.
    The alignments run on ``xp`` (`rtsearch.scoring.topdown.gpu.align_pairs`)."""
    best: tuple[float, ...] = (NONE, 0, 0.0)
    found = PrSM(sp.scan, -1, 0, 0, -1, NONE, -1, 0.0, False)
    for p in sp.precursors:
        prm = prm_masses(sp.mass, p.mass, sp.activation, merge_within=s.tolerance_da)
        options: list[tuple[int, int, int, int, np.ndarray]] = []  # protein, start, end, form, prefix masses
        for f in candidates(db, prm, p.mass, s).tolist():
            k = int(db.form_protein[f])
            options.append((k, int(db.form_start[f]), int(db.offsets[k + 1] - db.offsets[k]), f, db.form_prefix(f)))
        if positions is not None:
            window = s.max_shifts * s.max_shift_mass + p.mass * s.precursor_ppm * 1e-6
            for k, a, b in truncated(positions, prm, p.mass - WATER, tol=s.tolerance_da, window=window,
                                     limit=s.candidates * 10):  # fmt: skip
                full = db.prefix_of(k)
                options.append((k, a, b, -1, full[a : b + 1] - full[a]))
        if not options:
            continue
        scores = align_pairs([prm], [o[4] for o in options], np.array([(0, c) for c in range(len(options))]),
                             tolerance=s.tolerance_da, max_shifts=s.max_shifts, max_shift_mass=s.max_shift_mass,
                             precursor_tolerance=np.full(len(options), p.mass * s.precursor_ppm * 1e-6),
                             xp=xp)  # fmt: skip
        for (k, a, b, f, prefix), row in zip(options, scores.tolist(), strict=True):
            score, shifts = Alignment(tuple(row)).best
            if score <= NONE:
                continue
            mass = float(prefix[-1] + WATER)
            key = (score, -shifts, -abs(p.mass - mass))
            if key > best:
                best = key
                found = PrSM(sp.scan, k, a, b, f, score, shifts, p.mass - mass, bool(db.is_decoy[k]))
    return found
