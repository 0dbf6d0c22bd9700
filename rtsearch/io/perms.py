"""Permissions of what rtsearch creates: as the process's umask says, like any file it opens.

`tempfile.mkdtemp` and `mkstemp` (used to write folders and files atomically, then rename them into place)
create 0700 folders and 0600 files whatever the umask; an index built by root would be unreadable by the
service user, a results file by the lab's analysts. `as_umask` gives such a path the mode a plain
``mkdir``/``open`` would have given it.
"""

from __future__ import annotations

import os
from pathlib import Path


def umask() -> int:
    """The process's umask (Linux reads it from /proc without changing it; elsewhere set and restored)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def as_umask(path: str | Path) -> None:
    """Give ``path`` (a folder, or a file) the mode ``mkdir``/``open`` would have: 0777 / 0666 less the umask."""
    base = 0o777 if os.path.isdir(path) else 0o666
    os.chmod(path, base & ~umask())
