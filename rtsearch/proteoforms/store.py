"""A proteoform database on disk: a folder of ``.npy`` arrays (loaded memory-mapped), ``accessions.json`` and
``manifest.json`` (format and version, the ``[proteoforms]`` parameters, the inputs' hashes, counts), written
atomically as a peptide index is (`rtsearch.database.store.new_folder`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch import __version__
from rtsearch.config import parse_config, resolved_dict
from rtsearch.database.store import MANIFEST, map_arrays, new_folder
from rtsearch.errors import ConfigError, IndexMismatchError, InputError
from rtsearch.proteoforms.database import KnownShifts, ProteoformDatabase

FORMAT = "rtsearch-proteoforms"
FORMAT_VERSION = 1
_ARRAYS = ("residues", "offsets", "is_decoy", "prefix", "form_protein", "form_start", "form_delta", "form_kind",
           "form_mass")  # fmt: skip


def save_proteoforms(db: ProteoformDatabase, out: str | Path, *, inputs: list[dict[str, Any]],
                     build_seconds: float = 0.0) -> None:  # fmt: skip
    """Write ``db`` to folder ``out`` (a temporary folder beside it, then a rename); ``inputs``: the FASTA files'
    records (`rtsearch.database.store.file_record`)."""
    with new_folder(out, "an rtsearch proteoform database") as tmp:
        for name in _ARRAYS:
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(getattr(db, name)))
        (tmp / "accessions.json").write_text(json.dumps(db.accessions))
        manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "rtsearch_version": __version__,
                    "params": resolved_dict(db.params), "inputs": inputs, "counts": db.counts,
                    "known_shifts": dict(zip(db.known.names, db.known.mass.tolist(), strict=True)),
                    "bytes": sum(getattr(db, n).nbytes for n in _ARRAYS), "build_seconds": round(build_seconds, 3)}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of a proteoform database folder, checked for format and version."""
    p = Path(folder) / MANIFEST
    try:
        manifest: dict[str, Any] = json.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(f"{folder}: not an rtsearch proteoform database (no {MANIFEST}); build one with "
                         "'rtsearch proteoforms build'") from None  # fmt: skip
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{p}: unreadable manifest: {e}") from None
    if manifest.get("format") != FORMAT:
        raise InputError(f"{folder}: not an rtsearch proteoform database (a {manifest.get('format', '?')})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise IndexMismatchError(f"{folder}: proteoform database format {manifest.get('format_version')}, this "
                                 f"rtsearch reads {FORMAT_VERSION}; rebuild it with 'rtsearch proteoforms build'")
    return manifest


def load_proteoforms(folder: str | Path) -> ProteoformDatabase:
    """A saved proteoform database, its arrays memory-mapped."""
    manifest = read_manifest(folder)
    try:
        params = parse_config({"proteoforms": manifest["params"]}).proteoforms
    except (ConfigError, KeyError) as e:
        raise IndexMismatchError(f"{folder}: manifest parameters unreadable: {e}") from None
    arrays = map_arrays(folder, _ARRAYS, "proteoform")
    try:
        accessions = json.loads((Path(folder) / "accessions.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{folder}/accessions.json: missing or damaged: {e}") from None
    if len(accessions) + 1 != len(arrays["offsets"]):
        raise InputError(f"{folder}: accessions.json and offsets.npy disagree ({len(accessions)} proteins)")
    return ProteoformDatabase(accessions=accessions, known=KnownShifts.parse(params.known_ptms), params=params,
                              counts=dict(manifest.get("counts", {})), **arrays)  # fmt: skip
