"""An intake process's per-message parts without sockets: `decode`, a chunk's build, its peak check.

`bench/intake_cost.py` measures an intake process's whole read (socket, decode, chunks, hand-over) on this machine,
with its noise; this times the pure parts (decoding, a chunk's build, its peak check, its framing for the daemon) on
the same messages (the E. coli dev run's MS2, rt_load.py's header
layout) as the best of several repeats, for one checkout or several side by side (``--code``: each measured in
a process of its own, its own ``rtsearch`` first on the path).

    python bench/intake_parts.py --data ../shared/data --code . --code /tmp/base
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(data: Path, chunk: int) -> str:
    """This process's `rtsearch` (the first on ``sys.path``) timed on the parts; one line."""
    import numpy as np

    from bench.intake_cost import messages
    from rtsearch.serve.chunks import SPECTRA, ChunkBuilder
    from rtsearch.serve.framing import pack
    from rtsearch.wire import decode
    from rtsearch.wire_peaks import peak_problems

    msgs = messages(data, 5000)
    raws = [decode(m, peaks="raw") for m in msgs]

    def decode_all() -> None:
        for m in msgs:
            decode(m, peaks="raw")

    builder = ChunkBuilder()

    def build_all() -> None:
        for i in range(0, len(raws), chunk):
            for r in raws[i : i + chunk]:
                builder.add(r, 1, 2)  # type: ignore[arg-type]
            builder.build()

    first = raws[:chunk]
    mz = np.frombuffer(b"".join(r.mz for r in first), "<f8")  # type: ignore[union-attr]
    inten = np.frombuffer(b"".join(r.intensity for r in first), "<f4")  # type: ignore[union-attr]
    offsets = np.concatenate([[0], np.cumsum([len(r.intensity) // 4 for r in first])])  # type: ignore[union-attr]
    us = 1e6
    t_decode = min(timeit.repeat(decode_all, number=4, repeat=9)) / 4 / len(msgs) * us
    t_build = min(timeit.repeat(build_all, number=2, repeat=9)) / 2 / len(msgs) * us
    t_peaks = min(timeit.repeat(lambda: peak_problems(mz, inten, offsets), number=500, repeat=9)) / 500 * us
    for r in first:
        builder.add(r, 1, 2)  # type: ignore[arg-type]
    built = builder.build()[0]
    t_pack = min(timeit.repeat(lambda: pack(SPECTRA, built.parts()), number=500, repeat=9)) / 500 * us  # type: ignore[union-attr]
    return (f"decode {t_decode:.2f} µs a message; add + build {t_build:.2f} µs a message ({chunk} a chunk); "
            f"peak check {t_peaks:.1f} µs a chunk of {chunk} ({int(offsets[-1])} peaks); "
            f"framed for the daemon {t_pack:.1f} µs a chunk")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--code", type=Path, action="append", help="checkouts to measure (default this one)")
    ap.add_argument("--chunk", type=int, default=25, help="messages a chunk (a lane's share of a read at ~25,000/s)")
    ap.add_argument("--rounds", type=int, default=2, help="each checkout measured this many times, alternately")
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # internal: measure here with this checkout
    args = ap.parse_args()
    if args.one:
        sys.path[:0] = [str(args.one), str(ROOT)]  # its rtsearch first; this bench's helpers after it
        print(measure(args.data.resolve(), args.chunk), flush=True)
        return 0
    for _ in range(args.rounds):
        for code in args.code or [ROOT]:
            out = subprocess.run([sys.executable, __file__, "--data", str(args.data), "--chunk", str(args.chunk),
                                  "--one", str(code.resolve())], capture_output=True, text=True, check=False)
            print(f"{code}: {out.stdout.strip() or out.stderr[-500:]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
