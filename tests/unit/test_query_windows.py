"""A batch's query windows (`rtsearch.scoring.database.candidates.make_queries`) looked up in mass order from
`candidates.SORTED_SEARCH_MIN` queries: the bounds those looked up in arrival order give, on the BSA index."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.database.index import PeptideIndex
from rtsearch.scoring.database import candidates
from rtsearch.scoring.database.candidates import make_queries
from rtsearch.types import PROTON, Tolerance

ISO = (0, 1)


@pytest.mark.parametrize("tol", [Tolerance(20.0, "ppm"), Tolerance(0.5, "Da")])
def test_windows_looked_up_in_mass_order_are_those_in_arrival_order(bsa: PeptideIndex, tol: Tolerance,
                                                                    monkeypatch) -> None:  # fmt: skip
    # 600 seeded precursors across and beyond the BSA peptides' masses (a NaN among them): either way of looking up
    # the windows (`candidates.SORTED_SEARCH_MIN`) gives every query the same bounds
    rng = np.random.default_rng(7)
    mz = rng.uniform(300.0, 1500.0, 600)
    mz[[3, 300]] = bsa.mass[[10, 400]] / 2 + PROTON  # exactly on a peptide
    mz[77] = np.nan
    spectrum, charge = np.arange(600), rng.integers(1, 4, 600)
    charge[[3, 300]] = 2
    ways = []
    for threshold in (1 << 62, 0):
        monkeypatch.setattr(candidates, "SORTED_SEARCH_MIN", threshold)
        ways.append(make_queries(spectrum, charge, mz, bsa.mass, tol, ISO))
    arrival, by_mass = ways
    np.testing.assert_array_equal(arrival.lo, by_mass.lo)
    np.testing.assert_array_equal(arrival.hi, by_mass.hi)
    assert arrival.lo.dtype == by_mass.lo.dtype and (arrival.hi > arrival.lo).sum() > 30
    assert by_mass.lo[3] <= 10 < by_mass.hi[3] and by_mass.lo[300] <= 400 < by_mass.hi[300]
