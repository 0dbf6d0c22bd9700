"""What opening the target costs before scoring can start, part by part, on the GPU machine (issue 17: the search's
wall): CuPy's import and the CUDA context in a fresh process, then the bench index's fragment arrays (memory-mapped,
~1.1 GB for 20,000 proteins) read on the host alone and copied to the device by `rtsearch.scoring.upload` from the
map (``source="memory"``) or from the file (``"file"``), over thread counts and chunk sizes, alternately.

    python3 bench/upload_probe.py --index .benchcache/idx20k --rounds 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STARTUP = """
import time, json
t0 = time.perf_counter()
import cupy as cp
t1 = time.perf_counter()
cp.cuda.runtime.getDeviceCount()
t2 = time.perf_counter()
cp.zeros(1)  # the context and the memory pool
cp.cuda.Device().synchronize()
t3 = time.perf_counter()
props = cp.cuda.runtime.getDeviceProperties(0)
t4 = time.perf_counter()
print(json.dumps({"import cupy": t1 - t0, "device count": t2 - t1, "context + first array": t3 - t2,
                  "device properties": t4 - t3}))
"""


def host_read(path: Path, threads: int, chunk: int) -> float:
    """Seconds to read ``path`` whole into memory with ``threads`` threads (``os.preadv``, ``chunk`` bytes each)."""
    size = path.stat().st_size
    buf = np.empty(size, np.uint8)
    fd = os.open(path, os.O_RDONLY)
    starts = list(range(0, size, chunk))

    def work(k: int) -> None:
        for a in starts[k::threads]:
            os.preadv(fd, [memoryview(buf[a:a + chunk])], a)

    t0 = time.perf_counter()
    ws = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    os.close(fd)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res: dict[str, object] = {}
    res["startup"] = [json.loads(subprocess.run([sys.executable, "-c", STARTUP], capture_output=True, text=True,
                                                check=True).stdout) for _ in range(2)]  # fmt: skip
    print("startup", res["startup"], flush=True)
    import cupy as cp

    from rtsearch.scoring.upload import upload

    names = ("fragment_mz", "fragment_peptide")
    arrays = [np.load(args.index / f"{n}.npy", mmap_mode="r").view(np.ndarray) for n in names]
    nbytes = sum(a.nbytes for a in arrays)
    res["bytes"] = nbytes
    rows: list[dict[str, object]] = []
    ways = [("memory", 4, 16), ("file", 4, 16), ("file", 8, 16), ("file", 8, 32), ("memory", 8, 16),
            ("file", 16, 16)]
    for r in range(args.rounds):
        for t in (4, 8):
            s = sum(host_read(args.index / f"{n}.npy", t, 16 << 20) for n in names)
            rows.append({"round": r, "way": f"host read, {t} threads", "s": round(s, 4),
                         "GB/s": round(nbytes / s / 1e9, 2)})
        for source, threads, mb in ways:
            cp.get_default_memory_pool().free_all_blocks()
            t0 = time.perf_counter()
            got = [upload(cp, a, threads=threads, chunk_bytes=mb << 20, source=source) for a in arrays]  # type: ignore[arg-type]
            cp.cuda.Device().synchronize()
            s = time.perf_counter() - t0
            del got
            rows.append({"round": r, "way": f"upload {source}, {threads} threads, {mb} MB", "s": round(s, 4),
                         "GB/s": round(nbytes / s / 1e9, 2)})  # fmt: skip
            print(rows[-1], flush=True)
    res["rows"] = rows
    text = json.dumps(res)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
