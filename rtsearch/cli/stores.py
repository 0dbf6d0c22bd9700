"""What the store commands (``index``, ``library``, ``proteoforms``) share: input files checked up front, and an
``info`` printed the same way — the manifest as JSON, or labelled lines followed by the build parameters."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rtsearch.errors import InputError


def require_files(paths: Iterable[str], what: str) -> None:
    """`InputError` ``"<path>: <what> not found"`` for the first of ``paths`` that is not a file."""
    for f in paths:
        if not Path(f).is_file():
            raise InputError(f"{f}: {what} not found")


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
