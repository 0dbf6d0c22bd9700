"""Does the machine itself stall? Paced loops of fixed work, no rtsearch code: host-only NumPy,
device-only CuPy (a tiny kernel and a synchronize), and both; for each, the slow iterations and
when they came, plus the CPU steal time the kernel reports over the run.

    python bench/machine_stalls.py --hz 200 --seconds 8
    python bench/machine_stalls.py --hz 200 --seconds 8 --per-cpu 0,1,2,7,15

``--per-cpu`` runs the host loop in one process pinned to each listed CPU, all at once, and
says whether their slow iterations come at the same moments (the whole VM stalls) or not (a
CPU that could be avoided by pinning).

Seen on the GPU machines (bench/RESULTS.md): the engine paced at 200 batches/s slows 5-20x
every ~1.5 s with no daemon around; this separates CPU interference from the GPU driver.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from typing import Any

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


def _pinned(cpu: int, hz: float, seconds: float, out: Any) -> None:
    os.sched_setaffinity(0, {cpu})
    rng = np.random.default_rng(0)
    x = rng.random(20_000)
    rows = []
    start = time.perf_counter()
    for r in range(int(hz * seconds)):
        time.sleep(max(0.0, start + r / hz - time.perf_counter()))
        t0 = time.perf_counter()
        for _ in range(30):
            np.sort(x[:2000]).cumsum()
        rows.append((time.time(), (time.perf_counter() - t0) * 1e3))
    out.put((cpu, rows))


def per_cpu(cpus: list[int], hz: float, seconds: float) -> None:
    """The host loop pinned to each CPU of ``cpus`` at once; slow moments shared across CPUs."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_pinned, args=(c, hz, seconds, q)) for c in cpus]
    for p in procs:
        p.start()
    got = dict(q.get() for _ in procs)
    for p in procs:
        p.join()
    slow_at: dict[int, list[float]] = {}
    for cpu in cpus:
        a = np.array([ms for _, ms in got[cpu]])
        base = float(np.median(a))
        slow_at[cpu] = [w for w, ms in got[cpu] if ms > max(4 * base, base + 1.0)]
        print(f"cpu {cpu:>3}: median {base:.3f} ms p99 {np.percentile(a, 99):.3f} max {a.max():.2f}; "
              f"{len(slow_at[cpu])} slow", flush=True)
    # a slow moment: a 20 ms window; shared when it holds slow iterations of several CPUs
    moments: dict[int, set[int]] = {}
    for cpu, ws in slow_at.items():
        for w in ws:
            moments.setdefault(int(w * 50), set()).add(cpu)
    sizes = sorted((len(v) for v in moments.values()), reverse=True)
    print(f"slow 20-ms moments: {len(moments)}; CPUs slow in each (largest first): {sizes[:30]}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hz", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--per-cpu", help="comma list of CPUs: the host loop pinned to each, all at once")
    args = ap.parse_args()
    if args.per_cpu:
        per_cpu([int(c) for c in args.per_cpu.split(",")], args.hz, args.seconds)
        return 0
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
