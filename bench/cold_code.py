"""The same Python, run again after an idle gap: how much slower a lone spectrum's code is when it runs cold.

A lone spectrum at a few hundred a second crosses each of the daemon's processes (intake, lane, engine, publisher)
after that process idled for milliseconds. This times three of its pieces back to back and after a gap (slept or
spun in a Python loop), median µs:

- ``pickle``: `pickle.dumps` of a one-spectrum `SpectraBatch` (protocol 5, as `rtsearch.serve.pipes.Channel` does);
- ``raw hop``: a 1.6 kB round trip over a `multiprocessing` pipe to a process that answers with 3 kB (no pickling);
- ``channel hop``: the batch's round trip through a `Channel` to a process that answers with a 3 kB array (the
  engine pipe without the engine).

    python bench/cold_code.py --data ../shared/data [--gap-ms 20] [--count 200]
"""

from __future__ import annotations

import argparse
import multiprocessing
import pickle
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulators"))

from rtsearch.batch import SpectraBatch  # noqa: E402
from rtsearch.serve.pipes import Channel  # noqa: E402


def _answer(conn: Connection, channel: bool) -> None:
    ch = Channel(conn) if channel else None
    reply = np.zeros(3000, np.uint8)
    while True:
        try:
            if ch is not None:
                ch.recv()
                ch.send(("scored", reply))
            else:
                conn.recv_bytes()
                conn.send_bytes(reply.tobytes())
        except (EOFError, OSError):
            return


def timed(call: Callable[[], object], count: int, gap_s: float, spin: bool) -> float:
    """Median µs of ``call()``, each after ``gap_s`` slept (or spun, ``spin``); the first tenth left out."""
    out = []
    for _ in range(count):
        if gap_s and spin:
            end = time.perf_counter() + gap_s
            while time.perf_counter() < end:
                pass
        elif gap_s:
            time.sleep(gap_s)
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return float(np.median(out[count // 10 :]) * 1e6)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--gap-ms", type=float, default=20.0, help="the idle gap (a lane's share of 200 /s: 20 ms)")
    ap.add_argument("--count", type=int, default=200)
    args = ap.parse_args()
    from rtsearch_sim.replay import load_run

    spectra = [s for s in load_run(args.data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2]
    batch = SpectraBatch.of([spectra[len(spectra) // 2]])
    ctx = multiprocessing.get_context("spawn")
    pieces: dict[str, Callable[[], object]] = {
        "pickle": lambda: pickle.dumps(batch, protocol=5, buffer_callback=[].append)}  # fmt: skip
    ends = []
    for name, channel in (("raw hop", False), ("channel hop", True)):
        ours, theirs = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=_answer, args=(theirs, channel), daemon=True)
        proc.start()
        theirs.close()
        if channel:
            ch = Channel(ours)
            pieces[name] = lambda ch=ch: (ch.send(batch), ch.recv())
        else:
            payload = bytes(1600)
            pieces[name] = lambda c=ours, p=payload: (c.send_bytes(p), c.recv_bytes())
        ends.append((ours, proc))
    gap = args.gap_ms / 1e3
    print(f"{'µs, median':>14} | back to back | after 1 ms asleep | after {args.gap_ms:g} ms asleep | "
          f"after {args.gap_ms:g} ms spinning")
    for name, call in pieces.items():
        row = [timed(call, args.count, g, s) for g, s in ((0.0, False), (1e-3, False), (gap, False), (gap, True))]
        print(f"{name:>14} | " + " | ".join(f"{x:8.1f}" for x in row))
    for conn, proc in ends:
        conn.close()
        proc.join(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
