"""The fragment index built on the GPU is the NumPy build's bytes (`build_fragment_index(xp=cupy)`), and faster."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rtsearch.database.fragments import build_fragment_index
from rtsearch.scoring.backend import get_backend

pytestmark = pytest.mark.gpu


def test_the_gpu_builds_the_same_fragment_index(demo_index) -> None:
    cp = get_backend("cupy").xp
    idx, cfg = demo_index, demo_index.params
    args = (idx.bases, idx.forms, idx.mods.residue_masses(), idx.mods)
    opts = {"min_mz": cfg.fragment_min_mz, "max_mz": cfg.fragment_max_mz, "bucket_size": cfg.bucket_size}
    build_fragment_index(*args, xp=cp, **opts)  # compiles the kernels
    t0 = time.perf_counter()
    cpu = build_fragment_index(*args, xp=np, **opts)
    t1 = time.perf_counter()
    gpu = build_fragment_index(*args, xp=cp, **opts)
    t2 = time.perf_counter()
    print(f"\nfragment index of {len(idx.forms):,} peptides, {len(cpu.mz):,} fragments: NumPy {t1 - t0:.2f} s, "
          f"CuPy {t2 - t1:.2f} s")  # fmt: skip
    assert len(cpu.mz) == len(idx.fragments.mz) > 1_000_000
    for a, b in ((cpu.mz, gpu.mz), (cpu.peptide, gpu.peptide), (cpu.bucket_min_mz, gpu.bucket_min_mz)):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.tobytes() == b.tobytes()
