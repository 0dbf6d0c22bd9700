"""What produced a results file: rtsearch's version, the command, the full resolved configuration, the q-values'
estimate (``q_value_rule``, `rtsearch.search.fdr.RULE`), the searched target (its folder, the SHA-256 of its
manifest, and the manifest's format, parameters, inputs and counts: the FASTA files' paths and hashes) and the spectrum
files' paths and SHA-256.

`rtsearch search -o R` writes it beside the results as ``R.provenance.json`` (and, for Parquet, into the file's
schema metadata under ``rtsearch.provenance``); `rtsearch serve` the same beside each run file
(`rtsearch.io.results.write_run_results`). `InputHashes` hashes the spectrum files in a thread while they are
searched (they are read then anyway: from the page cache).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rtsearch import __version__
from rtsearch.io.perms import as_umask
from rtsearch.search.fdr import RULE

MANIFEST = "manifest.json"
SIDECAR = ".provenance.json"


def sha256(path: str | Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


class InputHashes:
    """``with InputHashes(paths) as hashes: ...; hashes.records()`` — each file's name, bytes and SHA-256,
    computed in a thread of its own."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.paths = [Path(p) for p in paths]
        self._out: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._hash, name="input-hashes", daemon=True)

    def __enter__(self) -> InputHashes:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._thread.join()

    def _hash(self) -> None:
        for p in self.paths:
            try:
                self._out.append({"path": str(p.resolve()), "bytes": p.stat().st_size, "sha256": sha256(p)})
            except OSError as e:
                self._out.append({"path": str(p), "error": str(e)})

    def records(self) -> list[dict[str, Any]]:
        self._thread.join()
        return list(self._out)


def record(*, command: Sequence[str], config: dict[str, Any], target: str | Path | None,
           inputs: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    """The provenance record (see the module docstring)."""
    out: dict[str, Any] = {
        "rtsearch": __version__, "written": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": list(command), "python": sys.version.split()[0], "platform": platform.platform(),
        "config": config, "q_value_rule": RULE,
    }  # fmt: skip
    if target is not None:
        folder = Path(target)
        manifest = folder / MANIFEST
        out["target"] = {"folder": str(folder.resolve()),
                         "manifest_sha256": sha256(manifest) if manifest.is_file() else None}  # fmt: skip
        out["target"].update(_described(manifest))
    if inputs is not None:
        out["inputs"] = inputs
    return out


def _described(manifest: Path) -> dict[str, Any]:
    """What a target's manifest says it was built from and how (its format, parameters, input files and counts),
    which an mzIdentML export names (`rtsearch.io.mzid`)."""
    try:
        m = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return {}
    return {k: m[k] for k in ("format", "params", "inputs", "sources", "counts") if k in m}


def write_json(rec: dict[str, Any], path: str | Path) -> Path:
    """``rec`` as JSON at ``path`` (atomically, as the umask says)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(rec, indent=2, default=str) + "\n")
    as_umask(tmp)
    os.replace(tmp, path)
    return path


def sidecar(results: str | Path) -> Path:
    """Where the provenance of ``results`` goes: ``<results>.provenance.json``."""
    p = Path(results)
    return p.with_name(p.name + SIDECAR)
