"""Build a `PeptideIndex` from FASTA files: the whole pipeline in one call."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch import __version__
from rtsearch.config import DatabaseConfig, resolved_dict
from rtsearch.database.arrays import argsort_stable, take_rows
from rtsearch.database.digest import digest
from rtsearch.database.fasta import read_fastas
from rtsearch.database.fragments import build_fragment_index
from rtsearch.database.index import PeptideIndex
from rtsearch.database.mods import ModSet
from rtsearch.database.peptides import CODE_OF_BYTE, Bases, enumerate_forms
from rtsearch.errors import InputError
from rtsearch.stopwatch import Stopwatch

FORMAT_VERSION = 1

# progress(stage, done, total): called as work advances; done/total in the stage's units.
ProgressFn = Callable[[str, int, int], None]


def _noop(stage: str, done: int, total: int) -> None:
    pass


def _stage(progress: ProgressFn, stage: str, total: int) -> Callable[[int], None]:
    """An ``advance(n)`` callback reporting a running count of ``stage`` to ``progress``."""
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        progress(stage, done, total)

    return advance


def build_index(
    fasta_paths: Sequence[str | Path],
    cfg: DatabaseConfig,
    *,
    xp: Any = np,
    progress: ProgressFn = _noop,
    input_hashes: list[dict[str, Any]] | None = None,
) -> PeptideIndex:
    """Digest, add decoys and modifications, sort by mass, build the fragment index.

    Parameters
    ----------
    fasta_paths
        Protein databases; accessions repeated across files keep their first entry.
    cfg
        Database parameters; they are recorded in the manifest.
    xp
        Array module for the large sorts (CuPy on a GPU machine).
    progress
        ``progress(stage, done, total)`` callback.
    input_hashes
        Manifest records of the inputs (name, size, sha256), written by the store.
    """
    t0 = time.perf_counter()
    lap = Stopwatch()
    mods = ModSet.parse(cfg.fixed_mods, cfg.variable_mods)
    proteins = read_fastas(list(fasta_paths))
    n_prot = len(proteins)
    lap("fasta")
    dig = digest(proteins, cfg, xp=xp, progress=_stage(progress, "digest", n_prot))
    if not len(dig):
        raise InputError("no peptides within the length bounds: check the FASTA and [database] settings")
    n_t = len(dig)
    decoy_of = dig.decoy_sources(xp) if cfg.decoys == "reverse" else np.zeros(0, dtype=np.int64)
    progress("decoys", 1, 1)
    lap("digest")

    src = np.concatenate([np.arange(n_t), decoy_of])
    positions, offsets = dig.positions(decoy_of)
    bases = Bases(
        residues=CODE_OF_BYTE[dig.text][positions],
        offsets=offsets,
        is_decoy=np.arange(src.shape[0]) >= n_t,
        protein_n_term=dig.protein_n_term[src],
        protein_c_term=dig.protein_c_term[src],
    )
    missed = dig.missed_cleavages[src]
    prot_offsets, prot_idx = take_rows(dig.protein_offsets, dig.proteins, src)
    del dig, positions
    lap("bases")

    residue_mass = mods.residue_masses()
    forms = enumerate_forms(bases, mods, cfg.max_variable_mods, residue_mass)
    lap("forms")
    keep = np.flatnonzero((forms.mass >= cfg.min_mass) & (forms.mass <= cfg.max_mass))
    forms = forms.take(keep[argsort_stable(forms.mass[keep], xp)])
    if len(forms) == 0:
        raise InputError(f"no peptides within {cfg.min_mass:g}–{cfg.max_mass:g} Da")
    progress("modifications", 1, 1)
    lap("sort")

    fragments = build_fragment_index(
        bases, forms, residue_mass, mods,
        min_mz=cfg.fragment_min_mz, max_mz=cfg.fragment_max_mz,
        bucket_size=cfg.bucket_size, xp=xp, progress=_stage(progress, "fragments", len(forms)),
    )  # fmt: skip
    lap("fragments")
    decoy_forms = int(bases.is_decoy[forms.base].sum())
    manifest: dict[str, Any] = {
        "format": "rtsearch-peptide-index",
        "format_version": FORMAT_VERSION,
        "rtsearch_version": __version__,
        "params": resolved_dict(cfg),
        "inputs": input_hashes or [{"name": Path(p).name} for p in fasta_paths],
        "counts": {
            "proteins": n_prot,
            "target_sequences": n_t,
            "decoy_sequences": int(decoy_of.shape[0]),
            "target_peptides": len(forms) - decoy_forms,
            "decoy_peptides": decoy_forms,
            "fragments": int(fragments.mz.shape[0]),
        },
        "build_seconds": round(time.perf_counter() - t0, 3),
        "stage_seconds": {k: round(v, 3) for k, v in lap.stages.items()},
    }
    index = PeptideIndex(
        params=cfg, mods=mods, proteins=[p.accession for p in proteins], bases=bases,
        base_missed_cleavages=missed, base_protein_offsets=prot_offsets, base_proteins=prot_idx,
        forms=forms, fragments=fragments, manifest=manifest,
    )  # fmt: skip
    manifest["bytes"] = index.nbytes()
    return index
