"""What a router process costs a message: ways of forwarding four-frame spectrum messages by their run.

Measured for the lanes' first front (router processes between the door and the lanes, commits 714b5a3–2708537;
bench/RESULTS.md), since replaced by intake processes that route what they decode (`rtsearch.serve.routing`).

100,000 wire-v1 spectrum messages (150 peaks) are queued on an ``ipc://`` PULL, then forwarded to four PUSH
sockets by run, three ways: ``recv_multipart``/``send_multipart`` (bytes), ZeroMQ's frames passed on as they are
(``copy=False``, the router's way), and bytes read frame by frame with ``RCVMORE``. Prints µs a message (wall and
the thread's CPU), twice each.

    python bench/router_cost.py [--messages 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.serving import ipc_pipe  # noqa: E402


def run_of(header: bytes) -> str | None:
    """The ``run`` of a wire header (``None``: none as a string), as the routers read it."""
    try:
        head = orjson.loads(header)
    except orjson.JSONDecodeError:
        return None
    run = head.get("run") if isinstance(head, dict) else None
    return run if isinstance(run, str) else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    n = ap.parse_args().messages
    folder = Path(tempfile.mkdtemp(prefix="router-cost-"))
    ctx: zmq.Context[Any] = zmq.Context()
    src, rin = ipc_pipe(ctx, folder / "in")
    outs, sinks = map(list, zip(*(ipc_pipe(ctx, folder / f"out{k}") for k in range(4)), strict=True))
    rng = np.random.default_rng(0)
    mz, it = rng.random(150).astype("<f8").tobytes(), rng.random(150).astype("<f4").tobytes()
    messages = [[b"spectrum", b'{"v":1,"run":"load-s%d","scan":%d,"ms_level":2,"rt":12.5,"precursor_mz":512.3,'
                 b'"charge":2,"n":150,"sent_ns":1234567890123}' % (i % 4, i), mz, it] for i in range(n)]  # fmt: skip
    lanes: dict[str | None, int] = {}

    def lane(run: str | None) -> int:
        return lanes.setdefault(run, len(lanes) % 4)

    def multipart() -> None:
        for _ in range(n):
            frames = rin.recv_multipart()
            outs[lane(run_of(frames[1]))].send_multipart(frames)

    def frames_as_they_are() -> None:
        recv, sends = rin.recv, [o.send for o in outs]
        for _ in range(n):
            frame = recv(copy=False)
            frames = [frame]
            while frame.more:
                frame = recv(zmq.NOBLOCK, copy=False)
                frames.append(frame)
            send = sends[lane(run_of(frames[1].bytes))]
            for f in frames[:-1]:
                send(f, zmq.SNDMORE, copy=False)
            send(frames[-1], copy=False)

    def rcvmore() -> None:
        recv, get, sends = rin.recv, rin.get, [o.send for o in outs]
        for _ in range(n):
            frames = [recv()]
            while get(zmq.RCVMORE):
                frames.append(recv(zmq.NOBLOCK))
            send = sends[lane(run_of(frames[1]))]
            for f in frames[:-1]:
                send(f, zmq.SNDMORE)
            send(frames[-1])

    ways: list[tuple[str, Callable[[], None]]] = [("recv_multipart", multipart), ("frames, copy=False",
                                                  frames_as_they_are), ("bytes + RCVMORE", rcvmore)]  # fmt: skip
    for name, way in ways * 2:
        for m in messages:
            src.send_multipart(m)
        time.sleep(0.5)
        t0, c0 = time.perf_counter(), time.thread_time()
        way()
        t1, c1 = time.perf_counter(), time.thread_time()
        for sink in sinks:
            while sink.poll(0):
                sink.recv_multipart()
        print(f"{name:20s} µs a message: wall {(t1 - t0) / n * 1e6:.2f}, thread CPU {(c1 - c0) / n * 1e6:.2f}")
    ctx.destroy(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
