"""NumPy and CuPy backends agree on every spectrum of every dev run (run on the GPU machine)."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.backend import get_backend
from rtsearch.engine import Engine
from rtsearch.index.build import build_index
from rtsearch.readers import read_spectra
from tests.devruns import DATABASE, DEV_RUNS

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cupy_backend():
    return get_backend("cupy")


@pytest.mark.parametrize("dev", DEV_RUNS, ids=lambda d: d.name)
def test_same_top1_and_scores(dev, data, cupy_backend):
    fastas, run = dev.paths(data)
    index = build_index(fastas, DATABASE)
    cfg = dev.search_config()
    spectra = list(read_spectra(run, default_charges=cfg.charges))
    ref = Engine(index, cfg, get_backend("numpy")).score(spectra)
    gpu = Engine(index, cfg, cupy_backend).score(spectra)
    assert ref.reason == gpu.reason
    same = ref.best.peptide == gpu.best.peptide
    print(f"{dev.name}: {same.sum()}/{len(same)} same top-1 peptide")
    assert same.all(), np.flatnonzero(~same)[:10]
    assert np.array_equal(ref.best.charge, gpu.best.charge)
    ok = ref.best.peptide >= 0
    a, b = ref.best.features[ok], gpu.best.features[ok]
    rel = np.abs(a - b) / np.maximum(np.abs(a), 1e-9)
    worst = rel.max(axis=0)
    print(f"{dev.name}: worst relative feature difference {worst.max():.2e}")
    assert worst.max() <= 1e-4
