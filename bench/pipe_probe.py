"""An engine process's round trip through `rtsearch.serve.pipes`, under a contended GIL, checkout against checkout.

A child answers each batch after busy-waiting ``--compute-ms`` (the engine's scoring) with a 2,000-float reply;
the parent's main thread sends real spectra (E. coli MS2, ``--sizes`` a batch) and waits, while ``--hogs`` Python
threads keep its GIL busy (an event loop and a results thread's share), switch interval 1 ms as in the daemon.
Prints the round trip less the compute, median and p90, per checkout (each in a process of its own, its
``rtsearch`` first on the path): a checkout with `pipes.Channel` uses it, an older one its ``send_object`` and
``recv_object``. Rounds alternate the checkouts.

    python bench/pipe_probe.py --data ../shared/data --code /tmp/base --code . [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _ends(conn: Any) -> tuple[Any, Any, Any]:
    """(send, recv, close) over ``conn`` with this checkout's pipes module."""
    from rtsearch.serve import pipes

    if hasattr(pipes, "Channel"):
        ch = pipes.Channel(conn)
        return ch.send, ch.recv, ch.close
    return (lambda o: pipes.send_object(conn, o)), (lambda: pipes.recv_object(conn)), conn.close


def _child(conn: Any, compute_s: float) -> None:
    import numpy as np

    send, recv, close = _ends(conn)
    while True:
        try:
            recv()
        except (EOFError, OSError):
            return
        t = time.perf_counter()
        while time.perf_counter() - t < compute_s:
            pass
        send(("scored", np.zeros(2000)))


def _hog(stop: threading.Event) -> None:
    d: dict[int, int] = {}
    while not stop.is_set():
        for i in range(2000):
            d[i % 97] = i * 2
        time.sleep(0.0005)


def measure(data: Path, sizes: list[int], trips: int, compute_ms: float, hogs: int) -> dict[str, Any]:
    """This checkout's round trips (run in its own process by `main`)."""
    import numpy as np

    from rtsearch.batch import SpectraBatch
    from rtsearch.io.spectra import read_spectra

    sys.setswitchinterval(0.001)
    spectra = [s for s in read_spectra(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2]
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=_child, args=(theirs, compute_ms / 1e3))
    proc.start()
    theirs.close()
    send, recv, close = _ends(ours)
    stop = threading.Event()
    threads = [threading.Thread(target=_hog, args=(stop,)) for _ in range(hogs)]
    for t in threads:
        t.start()
    out = {}
    try:
        for n in sizes:
            batch = SpectraBatch.of((spectra * (n // len(spectra) + 1))[:n])
            took = []
            for _ in range(trips):
                t0 = time.perf_counter()
                send(batch)
                recv()
                took.append(time.perf_counter() - t0 - compute_ms / 1e3)
            out[str(n)] = [round(1e3 * float(np.median(took)), 3), round(1e3 * float(np.percentile(took, 90)), 3)]
    finally:
        stop.set()
        for t in threads:
            t.join()
        close()
        proc.join(10)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--code", type=Path, action="append", help="checkouts to compare (default: this one)")
    ap.add_argument("--sizes", default="1,120", help="spectra a batch")
    ap.add_argument("--trips", type=int, default=200)
    ap.add_argument("--compute-ms", type=float, default=3.0)
    ap.add_argument("--hogs", type=int, default=2, help="Python threads keeping the sender's GIL busy")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a checkout's own process
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.one:
        print(json.dumps(measure(args.data.resolve(), sizes, args.trips, args.compute_ms, args.hogs)))
        return 0
    for r in range(args.rounds):
        for code in args.code or [ROOT]:
            cmd = [sys.executable, str(ROOT / "bench" / "pipe_probe.py"), "--one", "--data", str(args.data.resolve()),
                   "--sizes", args.sizes, "--trips", str(args.trips), "--compute-ms", str(args.compute_ms),
                   "--hogs", str(args.hogs)]  # fmt: skip
            env_path = f"{code.resolve()}:{ROOT / 'simulators'}"
            res = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=code.resolve(),
                                 env={**os.environ, "PYTHONPATH": env_path})  # fmt: skip
            got = json.loads(res.stdout.strip().splitlines()[-1])
            line = ", ".join(f"{n} spectra {m:.3f} / {p:.3f}" for n, (m, p) in got.items())
            print(f"round {r + 1}, {code}: round trip less compute, median / p90 ms: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
