"""Compile the bytecode of the packages a search or the daemon imports, once, in place, as pip does at install.

`bench/gpu_check.sh` runs it on the device machine, whose image sets ``PYTHONDONTWRITEBYTECODE`` and ships its
packages without ``.pyc`` files: every process there compiled numpy, CuPy and the rest from source (0.84 s of a
50,000-spectrum search's 4.99 s under cProfile). The files go beside the sources (``__pycache__``); a folder that
cannot be written is left as it is (its modules compile at import, as before). Not under
``PYTHONPYCACHEPREFIX``: there Python reads no ``.pyc`` of the standard library either (measured slower). Prints
how many seconds it took.

    python3 bench/precompile.py [DIR ...]
"""

from __future__ import annotations

import compileall
import importlib.util
import sys
import time
from pathlib import Path

# what `rtsearch search` and `rtsearch serve` import, directly or through each other (CuPy's own included)
PACKAGES = ("numpy", "cupy", "cupy_backends", "cupyx", "fastrlock", "pyarrow", "charset_normalizer", "tqdm", "zmq",
            "prometheus_client", "pyteomics", "psims", "lxml", "aiomqtt", "paho", "orjson", "ray")


def package_dirs(names: tuple[str, ...] = PACKAGES) -> list[Path]:
    """The installed folders of ``names`` (those found; none imported)."""
    out = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            out.extend(Path(p) for p in spec.submodule_search_locations)
    return out


def main(argv: list[str]) -> int:
    if any(a.startswith("-") for a in argv):
        print(__doc__)
        return 0 if argv in (["-h"], ["--help"]) else 2
    t = time.perf_counter()
    dirs = [*package_dirs(), *(Path(a) for a in argv)]
    ok = all(compileall.compile_dir(d, quiet=2, workers=0) for d in dirs if d.is_dir())
    print(f"precompiled {len(dirs)} folders in {time.perf_counter() - t:.1f} s"
          + ("" if ok else " (some files did not compile: left to compile at import)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
