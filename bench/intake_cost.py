"""What an intake process costs a spectrum message (`rtsearch.serve.intake_process`), stage by stage.

Real spectra (the E. coli dev run's MS2, looped) are encoded as wire-v1 messages (``rt_load.py``'s header
layout) and queued on an ``ipc://`` PULL; the intake's own `Reader` then reads and decodes them in chunks and
`send_items` packs them onto a socket pair drained by a thread, as the intake process does at high rates. Prints
µs a message for reading alone (recv), reading and decoding (`Reader.read`), the whole (chunks packed and
sent), and the whole when the door answers every spectrum ``shed`` (`rtsearch.serve.intake_process.Out` with an advice
of 1 s: what an intake process costs under overload; its answers drained by another process, as the daemon's results
proxy does — a draining thread here would share this one's GIL), with ``--cprofile N`` the N costliest functions of the
whole.

    python bench/intake_cost.py --data ../shared/data [--messages 50000] [--cprofile 20]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import socket
import subprocess
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
from rtsearch.serve.admission import Advice  # noqa: E402
from rtsearch.serve.chunks import Received, SpectraChunk  # noqa: E402
from rtsearch.serve.intake_process import Out, Shedding, send_items  # noqa: E402
from rtsearch.serve.reader import Reader  # noqa: E402

_DRAIN = "import sys, zmq; s = zmq.Context().socket(zmq.PULL); s.bind(sys.argv[1])\nwhile True: s.recv()"


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


def _count(items: list[SpectraChunk | Received]) -> int:
    """Messages in what a read gave: a chunk's spectra, one for anything else."""
    return sum(len(x) if isinstance(x, SpectraChunk) else 1 for x in items)


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
            got += _count(reader.read())

    def whole() -> None:
        got = 0
        while got < len(msgs):
            items = reader.read()
            got += _count(items)
            send_items(ours, items)

    # the door's answers leave for a process of their own (a PULL that discards them)
    drain = subprocess.Popen([sys.executable, "-c", _DRAIN, f"ipc://{folder / 'results'}"])
    advice = Advice(intakes=1)
    out = Out(ctx, ours, Shedding(f"ipc://{folder / 'results'}", advice.shared, 50.0), 0, 1)

    def shed() -> None:
        got = 0
        while got < len(msgs):
            advice.set_wait(1_000_000_000)  # every spectrum would wait 1 s: answered at the door
            items = reader.read()
            got += _count(items)
            out.hand(items)

    stages = (("recv", recv_only), ("read + decode", decode), ("whole", whole), ("whole, shed", shed))
    for name, stage in stages * 2:
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
    drain.kill()
    out.release()
    ctx.destroy(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
