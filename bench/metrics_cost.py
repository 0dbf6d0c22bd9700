"""What the daemon's metrics cost a lone spectrum: `DaemonMetrics.record` of the stats one spectrum alone through the
daemon reports (the loop's `Received` and `Queue`, the engine thread's `Taken`, `Queue` and `Scored`, the
publisher's `Answered`), µs, best of several repeats of N spectra, for one checkout or several side by side
(``--code``: each in a process of its own, its own ``rtsearch`` first on the path).

    python bench/metrics_cost.py --code . --code /tmp/base [--spectra 5000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(spectra: int) -> float:
    """µs of `record` a lone spectrum with this process's `rtsearch`."""
    import timeit

    import numpy as np

    from rtsearch.serve.metrics import DaemonMetrics
    from rtsearch.serve.stats import Answered, Queue, Received, RunAnswered, Scored, Taken

    m = DaemonMetrics()
    one = np.array([0.0012])
    stages = {"score": 0.002, "lock": 1e-5, "results": 2e-4, "publish": 1e-4, "gc": 1e-6}
    model = (1e-3, 1e-5, 2e-4, 1e-6, 1e-4, 1e-6)
    per_spectrum = [
        (Received(spectra={2: 1}, arrival=(one * 0.4, one * 0.5)), Queue(1, 0, 0.0, model)),
        (Taken(1, one, 1e-3, 2e-5), Queue(0, 1, 0.002, model)),
        (Scored(0.002, stages), Queue(0, 0, 0.0, model)),
        (Answered(one * 3, 0, {"identified": 1}, [RunAnswered("run-1", 1, 1, 12.5)]),),
    ]

    def lone() -> None:
        for _ in range(spectra):
            for stats in per_spectrum:
                m.record(*stats)

    return min(timeit.repeat(lone, number=1, repeat=7)) / spectra * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", action="append", type=Path, default=[], help="a checkout (default: this one)")
    ap.add_argument("--spectra", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=1, help="alternations over the checkouts")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(f"{measure(a.spectra):.2f}")
        return 0
    for r in range(a.rounds):
        for code in a.code or [ROOT]:
            env = {"PYTHONPATH": str(code.resolve()), "PATH": "/usr/bin:/bin"}
            out = subprocess.run([sys.executable, str(ROOT / "bench" / "metrics_cost.py"), "--child", "--spectra",
                                  str(a.spectra)], capture_output=True, text=True, check=True, env=env).stdout.strip()
            print(f"round {r + 1} {code}: record a lone spectrum {out} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
