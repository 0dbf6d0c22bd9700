"""Wake-up round trip between two processes: a ZeroMQ PAIR over ``ipc://`` against a Unix socket pair.

Why `rtsearch.serve.intake` hands chunks over a socket pair: at low rates every spectrum crosses
from the intake process alone, so the hop's wake-up is latency. Paced pings (the receiver
idles between them, as it does at a few hundred spectra a second), median and p90 of the
round trip.

    python bench/ipc_rtt.py --pings 300 --gap-ms 5
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import tempfile
import time
from pathlib import Path

import numpy as np
import zmq


def _zmq_echo(address: str) -> None:
    ctx = zmq.Context()
    s = ctx.socket(zmq.PAIR)
    s.connect(address)
    while (m := s.recv()) != b"q":
        s.send(m)
    s.close(0)
    ctx.term()


def _pair_echo(sock: socket.socket) -> None:
    while (m := sock.recv(16)) not in (b"q", b""):
        sock.sendall(m)


def _rtt(send, recv, pings: int, gap_s: float) -> np.ndarray:  # type: ignore[no-untyped-def]
    send(b"x")
    recv()
    out = []
    for _ in range(pings):
        time.sleep(gap_s)
        t0 = time.perf_counter()
        send(b"x")
        recv()
        out.append(time.perf_counter() - t0)
    send(b"q")
    return np.array(out) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pings", type=int, default=300)
    ap.add_argument("--gap-ms", type=float, default=5.0)
    args = ap.parse_args()
    spawn = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        address = f"ipc://{Path(tmp) / 'rtt'}"
        ctx = zmq.Context()
        s = ctx.socket(zmq.PAIR)
        s.bind(address)
        p = spawn.Process(target=_zmq_echo, args=(address,))
        p.start()
        a = _rtt(s.send, s.recv, args.pings, args.gap_ms / 1e3)
        p.join()
        s.close(0)
        ctx.term()
    ours, theirs = socket.socketpair()
    p = spawn.Process(target=_pair_echo, args=(theirs,))
    p.start()
    theirs.close()
    b = _rtt(ours.sendall, lambda: ours.recv(16), args.pings, args.gap_ms / 1e3)
    p.join()
    for name, x in (("zmq PAIR over ipc://", a), ("Unix socket pair", b)):
        print(f"{name:>22}: round trip median {np.median(x):.0f} µs, p90 {np.percentile(x, 90):.0f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
