"""The on-disk index: a folder of ``.npy`` arrays plus ``manifest.json``.

Arrays are loaded memory-mapped. The manifest records the format version, the
database parameters and the inputs' hashes; an index built by another format
version, or with parameters other than the ones a search asks for, is refused
with a message naming the difference.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch.config import DatabaseConfig, parse_config, resolved_dict
from rtsearch.database.build import FORMAT_VERSION
from rtsearch.database.fragments import FragmentIndex
from rtsearch.database.index import PeptideIndex
from rtsearch.database.mods import ModSet
from rtsearch.database.peptides import Bases, Forms
from rtsearch.errors import ConfigError, IndexMismatchError, InputError
from rtsearch.io.perms import as_umask

MANIFEST = "manifest.json"

_ARRAYS = {
    "bases_residues": ("bases", "residues"),
    "bases_offsets": ("bases", "offsets"),
    "bases_is_decoy": ("bases", "is_decoy"),
    "bases_protein_n_term": ("bases", "protein_n_term"),
    "bases_protein_c_term": ("bases", "protein_c_term"),
    "base_missed_cleavages": (None, "base_missed_cleavages"),
    "base_protein_offsets": (None, "base_protein_offsets"),
    "base_proteins": (None, "base_proteins"),
    "peptide_base": ("forms", "base"),
    "peptide_mod_pos": ("forms", "mod_pos"),
    "peptide_mod_id": ("forms", "mod_id"),
    "peptide_mass": ("forms", "mass"),
    "fragment_mz": ("fragments", "mz"),
    "fragment_peptide": ("fragments", "peptide"),
    "bucket_min_mz": ("fragments", "bucket_min_mz"),
}


def file_record(path: str | Path) -> dict[str, Any]:
    """Name, path, size and SHA-256 of an input file, for the manifest."""
    p = Path(path)
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return {"name": p.name, "path": str(p.resolve()), "bytes": p.stat().st_size, "sha256": h.hexdigest()}


def save_index(index: PeptideIndex, out: str | Path) -> None:
    """Write ``index`` to folder ``out`` atomically (a temporary folder, then a rename)."""
    with new_folder(out, "an rtsearch index") as tmp:
        for name, (group, attr) in _ARRAYS.items():
            owner = getattr(index, group) if group else index
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(getattr(owner, attr)))
        (tmp / "proteins.json").write_text(json.dumps(index.proteins))
        manifest = dict(index.manifest, bucket_size=index.fragments.bucket_size)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))


@contextlib.contextmanager
def new_folder(out: str | Path, kind: str) -> Iterator[Path]:
    """A temporary folder beside ``out`` to fill; on success it replaces ``out`` (a folder of ``kind`` with a
    manifest, or none: anything else there is refused), on failure it is removed."""
    dest = Path(out)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    as_umask(tmp)  # mkdtemp's 0700 would keep the service user out of an index built by root
    try:
        yield tmp
        if dest.exists():
            if not (dest / MANIFEST).exists():
                raise InputError(f"{dest}: exists and is not {kind}; not overwriting")
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of an index folder, checked for format and version."""
    p = Path(folder) / MANIFEST
    if not p.is_file():
        raise InputError(f"{folder}: not an rtsearch index (no {MANIFEST}); build one with 'rtsearch index build'")
    try:
        manifest: dict[str, Any] = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{p}: unreadable manifest: {e}") from None
    if manifest.get("format") != "rtsearch-peptide-index":
        raise InputError(f"{folder}: not an rtsearch peptide index")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise IndexMismatchError(
            f"{folder}: index format version {manifest.get('format_version')} but this rtsearch reads "
            f"version {FORMAT_VERSION}; rebuild it with 'rtsearch index build'"
        )
    return manifest


def check_params(manifest: dict[str, Any], wanted: DatabaseConfig, folder: str | Path) -> None:
    """Refuse an index whose database parameters differ from ``wanted``."""
    have = manifest["params"]
    want = resolved_dict(wanted)
    diff = [k for k in want if have.get(k) != want[k]]
    if diff:
        parts = "; ".join(f"{k}: index has {have.get(k)!r}, config asks {want[k]!r}" for k in diff)
        raise IndexMismatchError(f"{folder}: index built with other parameters ({parts}); rebuild it")


def map_arrays(folder: str | Path, names: Iterable[str], what: str) -> dict[str, np.ndarray]:
    """``folder``'s ``<name>.npy`` arrays, memory-mapped; a missing or damaged one is an `InputError` naming it
    (``what``: the store's kind, for the message)."""
    arrays: dict[str, np.ndarray] = {}
    for name in names:
        path = Path(folder) / f"{name}.npy"
        try:
            # a plain ndarray view of the map: same pages, but indexing skips np.memmap's Python-level
            # __getitem__/__array_finalize__ (microseconds per access, paid per result in the daemon)
            arrays[name] = np.load(path, mmap_mode="r").view(np.ndarray)
        except (OSError, ValueError) as e:
            raise InputError(f"{path}: missing or damaged {what} array: {e}") from None
    return arrays


def load_index(folder: str | Path, *, expect: DatabaseConfig | None = None) -> PeptideIndex:
    """Load an index memory-mapped; with ``expect``, refuse other parameters."""
    manifest = read_manifest(folder)
    try:
        params = parse_config({"database": manifest["params"]}).database
    except ConfigError as e:
        raise IndexMismatchError(f"{folder}: manifest parameters unreadable: {e}") from None
    if expect is not None:
        check_params(manifest, expect, folder)
    arrays = map_arrays(folder, _ARRAYS, "index")
    proteins = json.loads((Path(folder) / "proteins.json").read_text())
    a = arrays
    return PeptideIndex(
        params=params,
        mods=ModSet.parse(params.fixed_mods, params.variable_mods),
        proteins=proteins,
        bases=Bases(a["bases_residues"], a["bases_offsets"], a["bases_is_decoy"],
                    a["bases_protein_n_term"], a["bases_protein_c_term"]),
        base_missed_cleavages=a["base_missed_cleavages"],
        base_protein_offsets=a["base_protein_offsets"],
        base_proteins=a["base_proteins"],
        forms=Forms(a["peptide_base"], a["peptide_mod_pos"], a["peptide_mod_id"], a["peptide_mass"]),
        fragments=FragmentIndex(a["fragment_mz"], a["fragment_peptide"], a["bucket_min_mz"],
                                int(manifest["bucket_size"])),
        manifest=manifest,
        folder=Path(folder),
    )  # fmt: skip
