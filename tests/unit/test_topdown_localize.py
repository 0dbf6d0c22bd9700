"""Where a shift sits (`rtsearch.scoring.topdown.localize`): ranges and MIScores worked out by hand on a made-up
proteoform."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.database.mods import CODE
from rtsearch.proteoforms.database import KnownShifts
from rtsearch.scoring.topdown.localize import RATIO, explained, localize, site_of

SEQ = "GDPSLKG"  # G 57.02146, D 115.02694, P 97.05276, S 87.03203, L 113.08406, K 128.09496
MASS = {"G": 57.02146, "D": 115.02694, "P": 97.05276, "S": 87.03203, "L": 113.08406, "K": 128.09496}
PREFIX = np.concatenate([[0.0], np.cumsum([MASS[a] for a in SEQ])])
CODES = np.array([CODE[a] for a in SEQ])
PHOSPHO, ACETYL = 79.96633, 42.01057


def _prm(shift: float, on: int, keep: list[int]) -> np.ndarray:
    """PRMs of the prefix masses ``keep`` (1 … 6) with ``shift`` on residue ``on`` (1-based: P_j, j ≥ on)."""
    moved = PREFIX + np.where(np.arange(8) >= on, shift, 0.0)
    return np.concatenate([[0.0], np.sort(moved[keep]), [moved[-1]]])


def test_every_prefix_mass_seen_pins_the_residue() -> None:
    counts = explained(PREFIX, _prm(25.0, 4, [1, 2, 3, 4, 5, 6]), 25.0, 0.01)
    assert counts.tolist() == [3, 4, 5, 6, 5, 4, 3]  # split on residue r (0-based): P_1..P_r unshifted, rest shifted
    # P(r) ∝ R^count: 1 / (1 + 2/R + 2/R² + 2/R³) on residue 4 (0-based 3), every other residue below 0.15
    site = localize(PREFIX, _prm(25.0, 4, [1, 2, 3, 4, 5, 6]), 25.0, 0.01, CODES)
    assert (site.first, site.last, site.name) == (3, 3, "")
    assert site.score == pytest.approx(1 / (1 + 2 / RATIO + 2 / RATIO**2 + 2 / RATIO**3))


def test_a_gap_in_the_ladder_widens_the_range() -> None:
    # P_3, P_4, P_5 unseen: the shift may be on residue 3, 4, 5 or 6 (P_2 unshifted, P_6 shifted): four at 1/4 each
    site = localize(PREFIX, _prm(25.0, 4, [1, 2, 6]), 25.0, 0.01, CODES)
    assert (site.first, site.last) == (2, 5)
    assert site.score == pytest.approx(4 / (4 + 2 / RATIO + 1 / RATIO**2))
    # nothing seen after the shift: anywhere from residue 3 to the last, five at about 1/5 each
    site = localize(PREFIX, _prm(-18.0106, 7, [1, 2]), -18.0106, 0.01, CODES)
    assert (site.first, site.last) == (2, 6)
    assert site.score == pytest.approx(5 / (5 + 1 / RATIO + 1 / RATIO**2))


def test_ties_over_too_many_residues_fall_back_to_the_best_splits() -> None:
    """Eight tied residues hold 1/8 each, under the 0.15 threshold: the range is the tied residues, the score their
    sum, and a residue one PRM short of the rest is part of neither."""
    site = site_of(np.array([2, 2, 2, 2, 1, 2, 2, 2, 2]))
    assert (site.first, site.last) == (0, 8)
    assert site.score == pytest.approx(8 / (8 + 1 / RATIO))
    site = site_of(np.array([1, 3, 3, 2]), allowed=np.array([True, False, False, True]))  # only residues 0 and 3
    assert (site.first, site.last) == (3, 3) and site.score == pytest.approx(RATIO / (RATIO + 1))


def test_a_known_ptm_names_the_shift_and_holds_it_to_its_residues() -> None:
    known = KnownShifts.parse(("Phospho@STY", "Acetyl@K"))
    # P_3, P_4 unseen: residues 3, 4, 5 (0-based 2, 3, 4: P, S, L) tie; of them only S can carry a phosphate
    prm = _prm(PHOSPHO, 4, [1, 2, 5, 6])
    site = localize(PREFIX, prm, PHOSPHO, 0.01, CODES)
    assert (site.first, site.last, site.name) == (2, 4, "")  # as an unknown shift: P … L
    site = localize(PREFIX, prm, PHOSPHO, 0.01, CODES, known)
    assert (site.first, site.last, site.name) == (3, 3, "Phospho") and site.score == pytest.approx(1.0)
    # an acetylation's mass where the K (0-based 5) explains fewer PRMs than the best residue: not named
    prm = _prm(ACETYL, 2, [1, 2, 3, 4, 5, 6])
    site = localize(PREFIX, prm, ACETYL, 0.01, CODES, known)
    assert (site.first, site.last, site.name) == (1, 1, "")
    # on the K itself: named
    site = localize(PREFIX, _prm(ACETYL, 6, [1, 2, 3, 4, 5, 6]), ACETYL, 0.01, CODES, known)
    assert (site.first, site.last, site.name) == (5, 5, "Acetyl")
    # a mass no known PTM has
    assert localize(PREFIX, _prm(43.0, 6, [1, 6]), 43.0, 0.01, CODES, known).name == ""
