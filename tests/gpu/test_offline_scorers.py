"""The offline search on the GPU scores batches on several threads (`rtsearch.search.offline.SCORERS`, each on its own
CUDA stream): the table is the one a single thread gives — rows in the order read, the same matches, scores and
q-values — and the matches are NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.database.build import build_index
from rtsearch.scoring.backend import get_backend
from rtsearch.search import offline
from rtsearch.search.database import DatabaseTarget
from tests.devruns import DATABASE, DEV_RUNS

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dev", DEV_RUNS, ids=lambda d: d.name)
def test_threads_give_one_threads_table(dev, data, monkeypatch) -> None:
    fastas, run = dev.paths(data)
    index = build_index(fastas, DATABASE)
    cfg = dev.search_config()
    tables = {}
    for name, backend, scorers in (("numpy", "numpy", 1), ("one thread", "cupy", 1), ("threads", "cupy", 3)):
        monkeypatch.setattr(offline, "SCORERS", scorers)
        target = DatabaseTarget(index, cfg, get_backend(backend))
        tables[name], _ = offline.search_runs([run], target, batch_size=16)  # many batches, several in flight
    one, many, ref = tables["one thread"], tables["threads"], tables["numpy"]
    assert np.array_equal(many.rows("scan"), one.rows("scan")) and np.array_equal(many.rows("scan"), ref.rows("scan"))
    assert np.array_equal(many.match, one.match) and np.array_equal(many.match, ref.match)
    assert np.array_equal(many.score, one.score, equal_nan=True)
    assert np.array_equal(many.q, one.q)
    print(f"{dev.name}: {len(one.match)} rows, {int((one.q <= 0.01).sum())} at 1 % with one thread and with three")
