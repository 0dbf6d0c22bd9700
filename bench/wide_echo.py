"""The shared client's own ceiling: an echo service with no Python bottleneck of its own.

``../shared/tools/echo_floor.py`` answers in one Python process, so above ~35,000 messages/s it is the echo
that falls behind, not the client. This echo spreads the same work over ``--workers`` processes behind
ZeroMQ's C proxies (no GIL on the path between them), the shape of ``rtsearch serve --intakes N``::

    rt_load senders ─▶ PULL (bound) ══ proxy ══▶ PUSH ipc ─▶ worker 1..N ─▶ PUSH ipc ─▶ PULL ══ proxy ══▶ PUB (bound)

Each worker answers every ``spectrum`` message at once with a protocol-v1 result of the echo floor's shape
(``status`` unidentified, ``sent_ns`` echoed). What ``rt_load.py`` measures against it, with workers to
spare, is the client's own latency and throughput at that rate: what no service measured by that client
can show better.

    python3 bench/wide_echo.py --spectra tcp://127.0.0.1:P --results tcp://127.0.0.1:Q --workers 8
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import threading
import time

import orjson
import zmq


def worker(inner: str, outer: str) -> None:
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.setsockopt(zmq.RCVHWM, 0)
    push.setsockopt(zmq.SNDHWM, 0)
    pull.connect(inner)
    push.connect(outer)
    loads, dumps, wall = orjson.loads, orjson.dumps, time.time_ns
    while True:
        frames = pull.recv_multipart()
        if frames[0] != b"spectrum":
            continue
        h = loads(frames[1])
        push.send_multipart([b"result", dumps({"v": 1, "run": h["run"], "scan": h["scan"], "status": "unidentified",
                                               "reason": "echo", "sent_ns": h["sent_ns"], "published_ns": wall()})])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spectra", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--io-threads", type=int, default=1,
                   help="ZeroMQ I/O threads of the front (both proxies' sockets and their connections)")
    a = p.parse_args()
    ctx = zmq.Context(io_threads=a.io_threads)
    tmp = tempfile.mkdtemp(prefix="wide-echo-")
    inner, outer = f"ipc://{tmp}/in", f"ipc://{tmp}/out"
    front, to_workers = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    from_workers, pub = ctx.socket(zmq.PULL), ctx.socket(zmq.PUB)
    for s in (front, to_workers, from_workers, pub):
        s.setsockopt(zmq.SNDHWM, 0)
        s.setsockopt(zmq.RCVHWM, 0)
    front.bind(a.spectra)
    to_workers.bind(inner)
    from_workers.bind(outer)
    pub.bind(a.results)
    procs = [mp.get_context("fork").Process(target=worker, args=(inner, outer), daemon=True) for _ in range(a.workers)]
    for w in procs:
        w.start()
    for src, dst in ((front, to_workers), (from_workers, pub)):
        threading.Thread(target=zmq.proxy, args=(src, dst), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while all(w.is_alive() for w in procs):
            time.sleep(0.5)
    finally:
        for w in procs:
            w.kill()
        for name in ("in", "out"):
            with contextlib.suppress(OSError):
                os.unlink(f"{tmp}/{name}")
        os.rmdir(tmp)
    return 1


if __name__ == "__main__":
    sys.exit(main())
