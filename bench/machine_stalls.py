"""Does the machine itself stall? Paced loops of fixed work, no rtsearch code: host-only NumPy,
device-only CuPy (a tiny kernel and a synchronize), and both; for each, the slow iterations and
when they came, plus the CPU steal time the kernel reports over the run.

    python bench/machine_stalls.py --hz 200 --seconds 8

Seen on the GPU machines (bench/RESULTS.md): the engine paced at 200 batches/s slows 5-20x
every ~1.5 s with no daemon around; this separates CPU interference from the GPU driver.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def steal() -> int:
    return int(open("/proc/stat").readline().split()[8])


def loop(name: str, work, hz: float, seconds: float, spin: bool = False) -> None:  # type: ignore[no-untyped-def]
    out = []
    s0 = steal()
    start = time.perf_counter()
    for r in range(int(hz * seconds)):
        if spin:  # wait by polling the clock: the CPU never idles
            while time.perf_counter() < start + r / hz:
                pass
        else:
            time.sleep(max(0.0, start + r / hz - time.perf_counter()))
        t0 = time.perf_counter()
        work()
        out.append((time.time(), (time.perf_counter() - t0) * 1e3))
    a = np.array([ms for _, ms in out])
    base = float(np.median(a))
    slow = [(w, ms) for w, ms in out if ms > max(4 * base, base + 1.0)]
    print(f"{name}: median {base:.3f} ms p99 {np.percentile(a, 99):.3f} max {a.max():.2f}; {len(slow)} slow "
          f"(> 4x median); steal {steal() - s0} ticks", flush=True)
    for w, ms in slow[:12]:
        print(f"   {time.strftime('%H:%M:%S', time.localtime(w))}.{int(w % 1 * 1000):03d} {ms:.2f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hz", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.random(20_000)

    def host() -> None:  # ~0.3 ms of small NumPy calls, like the engine's host stages
        for _ in range(30):
            np.sort(x[:2000]).cumsum()

    loop("host numpy", host, args.hz, args.seconds)
    loop("host numpy, spinning between", host, args.hz, args.seconds, spin=True)
    try:
        import cupy as cp
    except ImportError:
        return 0
    d = cp.asarray(x)

    def device() -> None:
        (d * 2).sum().get()

    def both() -> None:
        host()
        device()

    device()
    loop("device cupy", device, args.hz, args.seconds)
    loop("host+device", both, args.hz, args.seconds)
    loop("host+device, spinning between", both, args.hz, args.seconds, spin=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
