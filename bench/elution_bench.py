"""The daemon's MS2 latency with and without elution tracking, BSA1's MS1 and MS2 replayed as acquired (issue 19).

Builds the BSA + yeast index (the dev run's), then for each mode — ``rtsearch serve`` plain, then with
``--elution`` — starts the daemon on free loopback ports, replays BSA1 (MS1 and MS2 sorted by RT, ``--loops``
times as runs of their own) at ``--rate`` spectra/s with the simulator (`rtsearch_sim`), and reports the MS2
answers' latency (the collector's, from the echoed ``sent_ns``), lost answers, and the elution events seen on the
results socket. One JSON line per mode and round (``--rounds``: plain, --elution, plain, … on a noisy machine).

    python3 bench/elution_bench.py --data .gpudata/data [--rate 200] [--loops 3] [--rounds 2]
                                   [--serve-args "--backend cupy"]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from rtsearch_sim.collector import Collector  # noqa: E402
from rtsearch_sim.replay import Sender, Sent, load_run, replay  # noqa: E402
from tests.streaming import ServeProcess, free_port  # noqa: E402


def count_events(endpoint: str, stop: threading.Event, out: list[int]) -> None:
    sock = zmq.Context.instance().socket(zmq.SUB)
    sock.setsockopt(zmq.SUBSCRIBE, b"elution")
    sock.connect(endpoint)
    while not stop.is_set():
        if sock.poll(100):
            sock.recv_multipart()
            out[0] += 1
    sock.close(0)


def measure(index: Path, runs: list, args: argparse.Namespace, elution: bool, work: Path) -> dict:
    sp, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    flags = ["--index", str(index), "--spectra", sp, "--spectra-mode", "pull", "--results", rp, "--metrics-port", "0",
             "--results-dir", str(work / ("el" if elution else "plain")), *shlex.split(args.serve_args),
             *(["--elution"] if elution else [])]  # fmt: skip
    daemon = ServeProcess(flags)
    try:
        assert daemon.wait_for(" ready: ", 300), daemon.log
        stop, events = threading.Event(), [0]
        counter = threading.Thread(target=count_events, args=(rp, stop, events), daemon=True)
        counter.start()
        col = Collector(rp).start()
        time.sleep(0.5)
        sent = Sent()
        with Sender(sp, mode="push") as s:
            replay(s, runs, speed=None, rate=args.rate, sent=sent)
        col.wait(len(sent.ms2), idle_s=10, timeout_s=120)
        col.stop()
        time.sleep(1.0)
        stop.set()
        rep = col.report(sent.ms2)
        lat = {k: round(v, 3) for k, v in rep.latency_ms.items()}
        return {"elution": elution, "rate": args.rate, "sent_ms2": len(sent.ms2), "lost": rep.lost,
                "latency_ms": lat, "elution_events": events[0]}  # fmt: skip
    finally:
        daemon.proc.terminate()
        daemon.proc.wait(60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--loops", type=int, default=3)
    ap.add_argument("--serve-args", default="")
    ap.add_argument("--rounds", type=int, default=1, help="plain then --elution, this many times (a noisy machine)")
    args = ap.parse_args()
    bsa = args.data / "bsa-orbitrapxl"
    spectra = sorted(load_run(bsa / "BSA1.mzML.gz"), key=lambda s: (s.rt, s.ms_level))
    runs = [(f"bsa1-{k}", spectra) for k in range(args.loops)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        index = work / "bsa.idx"
        subprocess.run([sys.executable, "-m", "rtsearch.cli", "index", "build", "--fasta", str(bsa / "BSA.fasta"),
                        str(args.data / "yeast-small/yeast_2021_04_reviewed.fasta"), "--out", str(index)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        for k in range(args.rounds):
            for elution in (False, True):
                row = measure(index, runs, args, elution, work)
                print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "round": k, **row}),
                      flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
