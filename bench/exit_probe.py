"""What a CUDA process's exit costs, and whether releasing the GPU ahead takes it off the exit (issue 17: the search
took 0.10-0.13 s from its summary to being reaped on the H200 machine, after ``os._exit``).

Each round starts a process that holds what a search holds (``--device-gb`` of device memory through CuPy's pool,
``--pinned-mb`` of pinned host memory, a kernel run), then, by variant: ``exit`` calls ``os._exit`` at once;
``free`` first frees CuPy's device and pinned pools (timed). (CuPy 14's runtime module has no ``deviceReset``.)
The parent times from the child's "ready" line until it is reaped. Variants alternate. One JSON line.

    python3 bench/exit_probe.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time
import cupy as cp
gb, mb, variant = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
a = cp.empty(int(gb * 1e9), dtype=cp.uint8); a[:] = 1
pinned = [cp.cuda.alloc_pinned_memory(16 << 20) for _ in range(mb // 16)]
int(a[:10].sum())
t = time.perf_counter()
if variant == "free":
    del a, pinned
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()
print(f"ready {time.perf_counter() - t:.4f}", flush=True)
os._exit(0)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device-gb", type=float, default=1.4)
    ap.add_argument("--pinned-mb", type=int, default=128)
    ap.add_argument("--variants", default="exit,free")
    args = ap.parse_args()
    rows: dict[str, list[list[float]]] = {}
    for _ in range(args.rounds):
        for variant in args.variants.split(","):
            p = subprocess.Popen([sys.executable, "-c", CHILD, str(args.device_gb), str(args.pinned_mb), variant],
                                 stdout=subprocess.PIPE, text=True)  # fmt: skip
            line = p.stdout.readline() if p.stdout else ""
            t = time.perf_counter()
            p.wait()
            release = float(line.split()[1]) if line.startswith("ready") else float("nan")
            rows.setdefault(variant, []).append([round(release, 4), round(time.perf_counter() - t, 4)])
    print(json.dumps({"release_s, then ready to reaped_s": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
