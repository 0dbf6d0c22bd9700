"""`bench/cold_code.py`: a lone spectrum's pieces timed back to back and after idle gaps, on the real E. coli run."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.cold_code import timed

ROOT = Path(__file__).resolve().parents[2]


def test_each_call_is_timed_after_its_gap_and_the_first_tenth_left_out() -> None:
    calls: list[float] = []
    durations = iter([0.02] * 2 + [0.001] * 18)  # the first tenth of 20 calls slow: left out of the median

    def call() -> None:
        calls.append(time.perf_counter())
        time.sleep(next(durations))

    median_us = timed(call, 20, 0.002, spin=False)
    assert len(calls) == 20
    assert 800 < median_us < 10_000  # ~1 ms a call (sleep's floor), not the 20 ms of the two first
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    assert min(gaps) >= 0.002  # each call came after its gap (and the call before)


def test_the_script_prints_a_row_a_piece_with_four_timings(data: Path) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "cold_code.py"), "--data", str(data), "--count", "10",
                          "--gap-ms", "2"], capture_output=True, text=True, timeout=120, check=True).stdout  # fmt: skip
    rows = {line.split("|")[0].strip(): line.split("|")[1:] for line in out.splitlines()[1:]}
    assert set(rows) == {"pickle", "raw hop", "channel hop"}
    for timings in rows.values():
        assert len(timings) == 4 and all(0 < float(t) < 1e5 for t in timings)
