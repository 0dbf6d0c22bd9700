"""Pack a CuPy kernel cache folder into the archive `rtsearch.scoring.kernel_cache` seeds from.

``bash bench/gpu_check.sh kernels`` runs the GPU tests with an empty ``CUPY_CACHE_DIR`` (seeded from the archive
already shipped, so nothing is lost) and calls this on it; copy ``$OUT/kernels-<tag>.tar.gz`` into
``rtsearch/data/``. The tar is written deterministically (sorted names, no times or owners): the same kernels give
the same bytes.

    python3 bench/kernel_archive.py CACHE_DIR OUT_DIR
"""

from __future__ import annotations

import argparse
import gzip
import io
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtsearch.scoring.kernel_cache import archive_tag  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    import cupy

    tag = archive_tag(str(cupy.cuda.Device().compute_capability), cupy.__version__)
    buf = io.BytesIO()
    files = sorted(f for f in args.cache.iterdir() if f.suffix == ".cubin")
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for f in files:
            data = f.read_bytes()
            info = tarfile.TarInfo(f.name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    out = args.out / f"kernels-{tag}.tar.gz"
    out.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    print(f"{out}: {len(files)} kernels, {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
