"""The benches' lighter results subscriber (`bench/results_tap.py`): what it keeps of a PUB's results, and its
latencies by hand."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import zmq

from bench.results_tap import tap_latency

ROOT = Path(__file__).resolve().parents[2]


def test_latencies_over_a_phase_by_hand(tmp_path: Path) -> None:
    s = 10**9
    rows = [(100 * s, 100 * s - 4_000_000, 100 * s - 1_000_000),  # sent 4 ms, published 1 ms before receipt
            (101 * s, 101 * s - 8_000_000, 0),  # no publishing stamp: counted in sent → tap only
            (200 * s, 200 * s - 50_000_000, 200 * s - 50_000_000)]  # outside the phase  # fmt: skip
    np.save(tmp_path / "tap.npy", np.array(rows, dtype=np.int64))
    got = tap_latency(tmp_path / "tap.npy", 99.0, 150.0)
    assert got["n"] == 2 and got["sent_p50"] == 6.0 and got["published_p50"] == 1.0 and got["published_p99"] == 1.0
    assert tap_latency(tmp_path / "none.npy", 0, 1) == {"n": 0}


def test_the_tap_keeps_one_result_in_every_n_with_its_stamps(tmp_path: Path) -> None:
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    out = tmp_path / "tap.npy"
    tap = subprocess.Popen([sys.executable, str(ROOT / "bench" / "results_tap.py"), f"tcp://127.0.0.1:{port}",
                            str(out), "--every", "4"])  # fmt: skip
    try:
        time.sleep(1.0)  # subscribed
        t0 = time.time_ns()
        for k in range(40):
            body = {"v": 1, "run": "r", "scan": k, "status": "shed", "sent_ns": t0 - 5_000_000, "published_ns": t0}
            pub.send_multipart([b"result", orjson.dumps(body)])
            pub.send_multipart([b"other", b"{}"])  # not a result: not subscribed to
        time.sleep(0.5)
    finally:
        tap.terminate()
        assert tap.wait(10) == 0
        pub.close(0)
        ctx.term()
    rows = np.load(out)
    assert rows.shape == (10, 3)  # every 4th of 40
    assert (rows[:, 1] == t0 - 5_000_000).all() and (rows[:, 2] == t0).all() and (rows[:, 0] >= t0).all()
