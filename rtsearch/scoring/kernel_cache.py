"""CUDA kernels compiled ahead, seeded into CuPy's kernel cache so that a fresh machine compiles none (issue 17).

CuPy compiles every kernel with NVRTC the first time a machine runs it — ours (`backend.compiled_kernel`) and its
own element-wise and reduction kernels alike — and keeps each cubin in its disk cache (``CUPY_CACHE_DIR``, by
default ``~/.cupy/kernel_cache``) under a hash of the source, the options, the architecture and the NVRTC version.
The first process on a machine pays seconds for that (6.2 of a 13.7 s index build, docs/history/RESULTS.md 2026-11-25).

``rtsearch/data/kernels-<tag>.tar.gz`` holds the cubins that the GPU tests compiled on the device machine
(``bash bench/gpu_check.sh kernels`` makes it; the tag names the GPU architecture and the CuPy version). `seed`
copies those missing into the cache before anything is compiled, when this machine's architecture and CuPy
version are the tag's. A file whose key does not match this machine's is never read (its name is not asked for),
and CuPy checks each file's own hash before it loads it: a stale or foreign archive costs nothing but a copy.
"""

from __future__ import annotations

import logging
import os
import tarfile
from pathlib import Path

log = logging.getLogger(__name__)

DATA = Path(__file__).resolve().parents[1] / "data"
_seeded: set[tuple[Path, str]] = set()  # (cache, tag) seeded by this process: each backend start asks again


def archive_tag(arch: str, cupy_version: str) -> str:
    """The tag of an archive made on ``arch`` (compute capability, e.g. ``90``) with CuPy ``cupy_version``."""
    return f"sm{arch}-cupy{cupy_version}"


def seed(cache_dir: Path, tag: str, *, data: Path = DATA) -> int:
    """Copy the archive ``tag``'s cubins missing from ``cache_dir`` into it; how many were copied (0 when there
    is no such archive, or it cannot be read: CuPy then compiles as it would have)."""
    archive = data / f"kernels-{tag}.tar.gz"
    if not archive.is_file():
        return 0
    copied = 0
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                if not member.isfile() or not name.endswith(".cubin") or (cache_dir / name).exists():
                    continue
                src = tar.extractfile(member)
                if src is None:
                    continue
                part = cache_dir / f".{name}.{os.getpid()}"  # written whole, then renamed: CuPy never sees half
                part.write_bytes(src.read())
                os.replace(part, cache_dir / name)
                copied += 1
    except (OSError, tarfile.TarError) as e:
        log.warning("precompiled kernels not seeded from %s: %s", archive.name, e)
    return copied


def seed_for(cp: object) -> int:
    """`seed` CuPy's cache (``cp``: the cupy module) with the archive made for this GPU and CuPy version."""
    try:
        arch = cp.cuda.Device().compute_capability  # type: ignore[attr-defined]
        where = getattr(cp.cuda.compiler, "get_cache_dir", None)  # type: ignore[attr-defined]
        cache = Path(where() if where else os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")
        version = cp.__version__  # type: ignore[attr-defined]
    except Exception as e:  # a CuPy without these: compile as before
        log.debug("kernel cache not seeded: %s", e)
        return 0
    tag = archive_tag(str(arch), str(version))
    if (cache, tag) in _seeded:
        return 0
    _seeded.add((cache, tag))
    n = seed(cache, tag)
    if n:
        log.info("%d precompiled kernels copied into CuPy's kernel cache %s", n, cache)
    return n
