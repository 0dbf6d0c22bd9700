"""What an intake process costs a spectrum message (`rtsearch.serve.intake_process`), stage by stage.

Real spectra (the E. coli dev run's MS2, looped) are encoded as wire-v1 messages (``rt_load.py``'s header
layout) and queued on an ``ipc://`` PULL; the intake's own `Reader` then reads and decodes them in chunks and
`send_items` packs them onto a socket pair drained by a thread, as the intake process does at high rates. Prints
µs a message for reading alone (recv), reading and decoding (`Reader.read`), and the whole (chunks packed and
sent), with ``--cprofile N`` the N costliest functions of the whole.

    python bench/intake_cost.py --data ../shared/data [--messages 50000] [--cprofile 20]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.serving import ipc_pipe  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.serve.intake_process import send_items  # noqa: E402
from rtsearch.serve.reader import Reader  # noqa: E402


def messages(data: Path, n: int) -> list[list[bytes]]:
    """``n`` spectrum messages of the E. coli run's MS2 spectra with one charge, looped (rt_load.py's layout)."""
    spectra = [s for s in read_spectra(data / "ecoli-small/Ecoli_MS2_small.mzML") if len(s.charges) == 1]
    out = []
    for i in range(n):
        s = spectra[i % len(spectra)]
        head = (b'{"v":1,"run":"bench-s%d","scan":%d,"ms_level":2,"rt":%r,"precursor_mz":%r,"charge":%d,"n":%d,'
                b'"sent_ns":%d}' % (i % 4, i + 1, s.rt, s.precursor_mz, s.charges[0], len(s.mz), time.time_ns()))
        out.append([b"spectrum", head, np.asarray(s.mz, "<f8").tobytes(), np.asarray(s.intensity, "<f4").tobytes()])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--cprofile", type=int, default=0, metavar="N")
    args = ap.parse_args()
    msgs = messages(args.data, args.messages)
    folder = Path(tempfile.mkdtemp(prefix="intake-cost-"))
    ctx: zmq.Context[Any] = zmq.Context()
    src, sock = ipc_pipe(ctx, folder / "spectra")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    drained = threading.Thread(target=lambda: [None for _ in iter(lambda: theirs.recv(1 << 20), b"")], daemon=True)
    drained.start()

    def fill() -> None:
        for m in msgs:
            src.send_multipart(m)
        time.sleep(0.5)

    def recv_only() -> None:
        for _ in range(len(msgs)):
            frame = sock.recv(copy=False)
            while frame.more:
                frame = sock.recv(copy=False)

    reader = Reader(sock)

    def decode() -> None:
        got = 0
        while got < len(msgs):
            got += sum(len(x) if hasattr(x, "ints") else 1 for x in reader.read())

    def whole() -> None:
        got = 0
        while got < len(msgs):
            items = reader.read()
            got += sum(len(x) if hasattr(x, "ints") else 1 for x in items)
            send_items(ours, items)

    for name, stage in (("recv", recv_only), ("read + decode", decode), ("whole", whole)) * 2:
        fill()
        t0, c0 = time.perf_counter(), time.thread_time()
        stage()
        t1, c1 = time.perf_counter(), time.thread_time()
        n = len(msgs)
        print(f"{name:14s} µs a message: wall {(t1 - t0) / n * 1e6:.2f}, thread CPU {(c1 - c0) / n * 1e6:.2f}")
    if args.cprofile:
        fill()
        prof = cProfile.Profile()
        prof.enable()
        whole()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.cprofile)
    ours.close()
    ctx.destroy(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
