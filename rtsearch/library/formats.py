"""Which reader a library file needs: EncyclopeDIA's SQLite (.dlib, .elib: `rtsearch.library.encyclopedia`), else
MSP / sptxt text (`rtsearch.library.files`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rtsearch.library.encyclopedia import read_encyclopedia
from rtsearch.library.files import LibraryEntry, Malformed, read_library

SQLITE = (".dlib", ".elib")


def read_entries(path: str | Path) -> Iterator[LibraryEntry | Malformed]:
    """Every entry of the library file ``path``, in order: a `LibraryEntry` or a `Malformed` with its reason."""
    return read_encyclopedia(path) if Path(path).suffix.lower() in SQLITE else read_library(path)
