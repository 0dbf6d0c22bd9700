"""One results folder, one daemon: an exclusive lock held while the daemon (or the lanes' front) serves.

Two daemons on one folder each finish the other's journals as if they were left by a crash (one "recovered" a live
journal and deleted it; after a SIGKILL of the first, 1,731 of 2,516 published results were in no file: issue 67).
The daemon holds ``fcntl.flock`` on ``<results-dir>/.journal/daemon.lock`` from before it reads a journal until it
has stopped; the kernel lets the lock go when the process ends, however it ends (SIGKILL, a power cut: no stale
lock to clean up). The file holds the owner's pid, for the error the next one gives.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from rtsearch.errors import InputError

NAME = "daemon.lock"


class FolderLock:
    """The lock on a results folder (see the module docstring); `acquire`, then `release` (or with ``with``)."""

    def __init__(self, journal_folder: str | Path) -> None:
        """``journal_folder``: the results folder's journal folder (`rtsearch.serve.runs.journal.FOLDER`; made if
        need be)."""
        self.path = Path(journal_folder) / NAME
        self._fd: int | None = None

    def acquire(self) -> FolderLock:
        """Take the lock; `InputError` (exit code 2) naming the daemon that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            folder = self.path.parent.parent
            raise InputError(f"results folder {folder} is in use by another rtsearch daemon (pid {holder}): one "
                             "folder, one daemon — give this one its own --results-dir") from None  # fmt: skip
        except OSError:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):  # only for the message above: the lock is the flock, not the text
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the flock goes with it (the file stays: removing it would race the next owner)
            self._fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
