"""`rtsearch.scoring.backend.start_driver`: the CUDA driver started and device 0's primary context made in a thread
before CuPy is imported; CuPy's runtime then works in that context (a kernel's result, a copy back), in a new
process as a search runs it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def test_cupy_runs_in_the_context_started_ahead() -> None:
    code = textwrap.dedent("""
        import logging, sys, threading
        logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(message)s")
        from rtsearch.scoring.backend import get_backend, start_driver
        start_driver("auto")
        [t.join() for t in threading.enumerate() if t.name == "cuda-driver"]
        backend = get_backend("cupy")
        cp = backend.xp
        a = cp.arange(1_000_000, dtype=cp.int64)
        print("sum", int(a.sum()), "device", cp.cuda.runtime.getDevice())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "CUDA driver started, device 0's primary context made" in out.stdout
    assert f"sum {999_999 * 1_000_000 // 2} device 0" in out.stdout
