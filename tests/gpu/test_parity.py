"""NumPy and CuPy backends agree on every spectrum of every dev run (run on the GPU machine)."""

from __future__ import annotations

import dataclasses

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
    cfg = dataclasses.replace(dev.search_config(), ranks=3)  # every rank compared
    spectra = list(read_spectra(run, default_charges=cfg.charges))
    ref = Engine(index, cfg, get_backend("numpy")).score(SpectraBatch.of(spectra))
    # the whole run as one batch (preprocessed on the device), and batches of 32 (preprocessed on the host); the
    # best matches chosen on the host (small batches) or on the device
    gpu = Engine(index, cfg, cupy_backend)
    on_device = Engine(index, cfg, cupy_backend, device_choice_min=0)
    variants = (("one batch", len(spectra), gpu), ("batches of 32", 32, gpu),
                ("one batch, chosen on the device", len(spectra), on_device),
                ("batches of 32, chosen on the device", 32, on_device))  # fmt: skip
    for label, size, engine in variants:
        same = worst = 0.0
        for start in range(0, len(spectra), size):
            rows = range(start, min(start + size, len(spectra)))
            n_same, w = _compare(ref.take(rows), engine.score(SpectraBatch.of([spectra[i] for i in rows])))
            same, worst = same + n_same, max(worst, w)
        print(f"{dev.name}, {label}: {same:.0f}/{len(spectra)} same top-1 peptide, "
              f"worst relative feature difference {worst:.2e}")  # fmt: skip


def _compare(ref, gpu) -> tuple[int, float]:
    """Asserts the same reasons, peptides and charges at every rank, features within 1e-4; (same top-1, worst)."""
    assert ref.reason == gpu.reason and len(ref.lower) == len(gpu.lower) == 2
    worst = 0.0
    for r, g in zip([ref.best, *ref.lower], [gpu.best, *gpu.lower], strict=True):
        same = r.match == g.match
        assert same.all(), np.flatnonzero(~same)[:10]
        assert np.array_equal(r.charge, g.charge)
        ok = r.match >= 0
        a, b = r.features[ok], g.features[ok]
        worst = max(worst, float((np.abs(a - b) / np.maximum(np.abs(a), 1e-9)).max()) if a.size else 0.0)
    assert worst <= 1e-4
    return int((ref.best.match == gpu.best.match).sum()), worst
