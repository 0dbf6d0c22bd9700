"""The index built on the GPU is the NumPy build's bytes (`build_fragment_index`, `build_index`), and faster."""

from __future__ import annotations

import time
from pathlib import Path

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


def test_the_gpu_builds_the_same_whole_index() -> None:
    """Digest groups, decoys and the form sort on CuPy too: every array of the index the same bytes."""
    from rtsearch.config import DatabaseConfig
    from rtsearch.database.build import build_index

    demo_fasta = Path(build_index.__code__.co_filename).parents[1] / "data" / "ecoli.fasta"
    cp = get_backend("cupy").xp
    cfg = DatabaseConfig(specificity="semi", missed_cleavages=1, max_length=30)  # 4 × the spans of the default
    cpu, gpu = build_index([demo_fasta], cfg, xp=np), build_index([demo_fasta], cfg, xp=cp)
    for name in ("residues", "offsets", "is_decoy", "protein_n_term", "protein_c_term"):
        assert getattr(cpu.bases, name).tobytes() == getattr(gpu.bases, name).tobytes(), name
    for name in ("base", "mod_pos", "mod_id", "mass"):
        assert getattr(cpu.forms, name).tobytes() == getattr(gpu.forms, name).tobytes(), name
    assert cpu.base_proteins.tobytes() == gpu.base_proteins.tobytes()
    assert cpu.fragments.mz.tobytes() == gpu.fragments.mz.tobytes()
    print(f"\nsemi-specific demo index: {len(cpu.forms):,} peptides; stages CPU {cpu.manifest['stage_seconds']}, "
          f"GPU {gpu.manifest['stage_seconds']}")  # fmt: skip
