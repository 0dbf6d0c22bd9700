"""Build a `PeptideIndex` from FASTA files: the whole pipeline in one call."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch import __version__
from rtsearch.config import DatabaseConfig, resolved_dict
from rtsearch.database.digest import decoy_sequence, digest
from rtsearch.database.fasta import read_fastas
from rtsearch.database.fragments import build_fragment_index
from rtsearch.database.index import PeptideIndex
from rtsearch.database.mods import ModSet
from rtsearch.database.peptides import Bases, encode, enumerate_forms
from rtsearch.errors import InputError

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
    mods = ModSet.parse(cfg.fixed_mods, cfg.variable_mods)
    proteins = read_fastas(list(fasta_paths))
    n_prot = len(proteins)
    peptides = digest(proteins, cfg, progress=_stage(progress, "digest", n_prot))
    if not peptides:
        raise InputError("no peptides within the length bounds: check the FASTA and [database] settings")
    target_seqs = [o.sequence for o in peptides.values()]
    origins = list(peptides.values())
    decoy_seqs: list[str] = []
    decoy_of: list[int] = []
    if cfg.decoys == "reverse":
        keys = peptides.keys()
        for i, seq in enumerate(target_seqs):
            d = decoy_sequence(seq, cfg.enzyme)
            if (d.replace("I", "L") if cfg.isoleucine_equals_leucine else d) in keys:
                continue
            decoy_seqs.append(d)
            decoy_of.append(i)
    progress("decoys", 1, 1)

    src = list(range(len(target_seqs))) + decoy_of
    residues, offsets = encode(target_seqs + decoy_seqs)
    n_t = len(target_seqs)
    bases = Bases(
        residues=residues,
        offsets=offsets,
        is_decoy=np.arange(len(src)) >= n_t,
        protein_n_term=np.array([origins[s].protein_n_term for s in src], dtype=bool),
        protein_c_term=np.array([origins[s].protein_c_term for s in src], dtype=bool),
    )
    missed = np.array([origins[s].missed_cleavages for s in src], dtype=np.uint8)
    prot_lists = [origins[s].proteins for s in src]
    prot_offsets = np.zeros(len(src) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in prot_lists], out=prot_offsets[1:])
    prot_idx = np.fromiter((k for p in prot_lists for k in p), dtype=np.int32, count=int(prot_offsets[-1]))
    del peptides, origins, prot_lists

    residue_mass = mods.residue_masses()
    forms = enumerate_forms(bases, mods, cfg.max_variable_mods, residue_mass)
    keep = np.flatnonzero((forms.mass >= cfg.min_mass) & (forms.mass <= cfg.max_mass))
    forms = forms.take(keep[np.argsort(forms.mass[keep], kind="stable")])
    if len(forms) == 0:
        raise InputError(f"no peptides within {cfg.min_mass:g}–{cfg.max_mass:g} Da")
    progress("modifications", 1, 1)

    fragments = build_fragment_index(
        bases, forms, residue_mass, mods,
        min_mz=cfg.fragment_min_mz, max_mz=cfg.fragment_max_mz,
        bucket_size=cfg.bucket_size, xp=xp, progress=_stage(progress, "fragments", len(forms)),
    )  # fmt: skip
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
            "decoy_sequences": len(decoy_seqs),
            "target_peptides": len(forms) - decoy_forms,
            "decoy_peptides": decoy_forms,
            "fragments": int(fragments.mz.shape[0]),
        },
        "build_seconds": round(time.perf_counter() - t0, 3),
    }
    index = PeptideIndex(
        params=cfg, mods=mods, proteins=[p.accession for p in proteins], bases=bases,
        base_missed_cleavages=missed, base_protein_offsets=prot_offsets, base_proteins=prot_idx,
        forms=forms, fragments=fragments, manifest=manifest,
    )  # fmt: skip
    manifest["bytes"] = index.nbytes()
    return index
