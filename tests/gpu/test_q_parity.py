"""NumPy and CuPy give the same q-values on every dev run: the whole offline search (scores, the run's
discriminant, PSM and peptide q-values, PEP) on each backend (issue 70; run on the GPU machine)."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.database.build import build_index
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.offline import search_runs
from tests.devruns import DATABASE, DEV_RUNS

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dev", DEV_RUNS, ids=lambda d: d.name)
def test_same_q_values(dev, data):
    fastas, run = dev.paths(data)
    index = build_index(fastas, DATABASE)
    tables = {name: search_runs([run], DatabaseTarget(index, dev.search_config(), get_backend(name)))[0]
              for name in ("numpy", "cupy")}  # fmt: skip
    a, b = tables["numpy"], tables["cupy"]
    assert np.array_equal(a.match, b.match) and np.array_equal(a.decoy, b.decoy)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.peptide_q, b.peptide_q)
    np.testing.assert_allclose(a.score, b.score, rtol=1e-6, atol=1e-9)
    counts = [(t.counts_at(0.01), t.counts_at(0.05)) for t in (a, b)]
    print(f"{dev.name}: (PSMs, peptides) at 1 % and 5 %, NumPy {counts[0]}, CuPy {counts[1]}")
    assert counts[0] == counts[1]
