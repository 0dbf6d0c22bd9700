"""NumPy and CuPy backends agree on every spectrum of every dev run (run on the GPU machine)."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.database.build import build_index
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.engine import Engine
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
    ref = Engine(index, cfg, get_backend("numpy")).score(SpectraBatch.of(spectra))
    # the whole run as one batch (preprocessed on the device), and batches of 32 (preprocessed on the host)
    gpu = Engine(index, cfg, cupy_backend)
    for label, size in (("one batch", len(spectra)), ("batches of 32", 32)):
        same = worst = 0.0
        for start in range(0, len(spectra), size):
            rows = range(start, min(start + size, len(spectra)))
            n_same, w = _compare(ref.take(rows), gpu.score(SpectraBatch.of([spectra[i] for i in rows])))
            same, worst = same + n_same, max(worst, w)
        print(f"{dev.name}, {label}: {same:.0f}/{len(spectra)} same top-1 peptide, "
              f"worst relative feature difference {worst:.2e}")  # fmt: skip


def _compare(ref, gpu) -> tuple[int, float]:
    """Asserts the same reasons, top-1 peptides and charges, features within 1e-4; (same, worst)."""
    assert ref.reason == gpu.reason
    same = ref.best.match == gpu.best.match
    assert same.all(), np.flatnonzero(~same)[:10]
    assert np.array_equal(ref.best.charge, gpu.best.charge)
    ok = ref.best.match >= 0
    a, b = ref.best.features[ok], gpu.best.features[ok]
    worst = float((np.abs(a - b) / np.maximum(np.abs(a), 1e-9)).max()) if a.size else 0.0
    assert worst <= 1e-4
    return int(same.sum()), worst
