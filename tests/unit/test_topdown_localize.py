"""Where a shift sits (`rtsearch.scoring.topdown.localize`): ranges worked out by hand on a made-up proteoform."""

from __future__ import annotations

import numpy as np

from rtsearch.database.mods import CODE
from rtsearch.proteoforms.database import KnownShifts
from rtsearch.scoring.topdown.localize import localize, name

PREFIX = np.concatenate([[0.0], np.cumsum([71.03711, 87.03203, 97.05276, 101.04768, 113.08406, 128.09496, 57.02146])])


def _prm(shift: float, on: int, keep: list[int]) -> np.ndarray:
    """PRMs of the prefix masses ``keep`` (1 … 6) with ``shift`` on residue ``on`` (1-based: P_j, j ≥ on)."""
    moved = PREFIX + np.where(np.arange(8) >= on, shift, 0.0)
    return np.concatenate([[0.0], np.sort(moved[keep]), [moved[-1]]])


def test_every_prefix_mass_seen_pins_the_residue() -> None:
    assert localize(PREFIX, _prm(79.96633, 4, [1, 2, 3, 4, 5, 6]), 79.96633, 0.01) == (3, 3)  # residue 4, 0-based 3


def test_a_gap_in_the_ladder_widens_the_range() -> None:
    # P_3, P_4, P_5 unseen: the shift may be on residue 3, 4, 5 or 6 (P_2 unshifted, P_6 shifted)
    assert localize(PREFIX, _prm(79.96633, 4, [1, 2, 6]), 79.96633, 0.01) == (2, 5)
    # nothing seen after the shift: anywhere from residue 3 to the last
    assert localize(PREFIX, _prm(-18.0106, 7, [1, 2]), -18.0106, 0.01) == (2, 6)


def test_a_known_ptm_names_the_shift_where_its_residue_is_in_range() -> None:
    known = KnownShifts.parse(("Phospho@STY", "Acetyl@K"))
    s, k, g = CODE["S"], CODE["K"], CODE["G"]
    assert name(known, np.array([g, s, g]), 79.9663, 0.01) == "Phospho"
    assert name(known, np.array([g, g]), 79.9663, 0.01) == ""  # no S, T or Y in range
    assert name(known, np.array([k]), 42.0106, 0.01) == "Acetyl"
    assert name(known, np.array([k]), 43.0, 0.01) == ""  # no known mass
