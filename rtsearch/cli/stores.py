"""What the commands share: input files and output paths checked up front (before any work, so a long search does
not end in an error about where it writes), and the store commands' (``index``, ``library``, ``proteoforms``)
``info`` printed the same way — the manifest as JSON, or labelled lines followed by the build parameters."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rtsearch.errors import InputError


def require_files(paths: Iterable[str], what: str) -> None:
    """`InputError` ``"<path>: <what> not found"`` for the first of ``paths`` that is not a file."""
    for f in paths:
        if not Path(f).is_file():
            raise InputError(f"{f}: {what} not found")


def require_writable(path: str | Path, what: str = "output", *, folders: bool = False) -> None:
    """`InputError` ``"<path>: cannot write <what> (…)"`` unless ``path`` can be created or replaced: it is not a
    folder, and its folder takes files (``folders``: the first of its folders that exists, the rest made later)."""
    out = Path(path).absolute()
    if out.is_dir():
        raise InputError(f"{path}: cannot write {what} (it is a folder)")
    folder = out.parent
    while folders and not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{path}: cannot write {what} (no folder {folder})")
    if not os.access(folder, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise InputError(f"{path}: cannot write {what} (permission denied)")


def print_info(manifest: dict[str, Any], lines: Callable[[], Iterable[tuple[str, str]]], *, as_json: bool) -> None:
    """``manifest`` as JSON (``as_json``), else each (label, text) of ``lines()`` and then its ``params``, one a
    line (``lines`` is called only then: JSON needs none of the fields it reads)."""
    if as_json:
        print(json.dumps(manifest, indent=2))
        return
    for label, text in lines():
        print(f"{label:<12} {text}")
    for k, v in manifest["params"].items():
        print(f"  {k:<26} {v}")
