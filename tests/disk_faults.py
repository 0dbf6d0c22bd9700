"""A results folder that fails the journal, without root or a file system of its own (issue 67, S6, S7).

`Disk` replaces ``os.open`` and ``os.write`` as `rtsearch.serve.runs.journal` sees them: the errors a folder made
immutable (``chattr +i``: EPERM) or a full disk (ENOSPC, a write cut short) give.
"""

from __future__ import annotations

import errno
import os
from typing import Any

import pytest

from rtsearch.serve.runs import journal as journal_module
from rtsearch.serve.runs.journal import FOLDER


class Disk:
    """The journal's ``os.open`` / ``os.write``, failing while ``full`` (ENOSPC: a write cut short after half its
    bytes, as a disk filling up does) or ``frozen`` (EPERM on making or opening a file in the journal folder)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = self.frozen = False
        self._open, self._write = os.open, os.write
        monkeypatch.setattr(journal_module.os, "open", self.open)
        monkeypatch.setattr(journal_module.os, "write", self.write)

    def open(self, path: Any, flags: int, *args: Any) -> int:
        if self.frozen and FOLDER in str(path):
            raise PermissionError(errno.EPERM, "Operation not permitted", str(path))
        return self._open(path, flags, *args)

    def write(self, fd: int, data: Any) -> int:
        if self.full:
            view = memoryview(data)
            if len(view) > 1:
                return self._write(fd, view[: len(view) // 2])  # part of it fits; the next write fails
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._write(fd, data)
