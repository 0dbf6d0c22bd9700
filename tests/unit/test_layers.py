"""The layer rule of ARCHITECTURE.md: the core never imports asyncio, ZeroMQ, MQTT or Prometheus."""

from __future__ import annotations

import subprocess
import sys

CORE = [
    "rtsearch.types", "rtsearch.spectrum", "rtsearch.fdr", "rtsearch.engine", "rtsearch.runs", "rtsearch.psms",
    "rtsearch.backend", "rtsearch.index.build", "rtsearch.index.store", "rtsearch.index.library",
    "rtsearch.scoring.features", "rtsearch.scoring.matching", "rtsearch.scoring.candidates",
    "rtsearch.scoring.library", "rtsearch.scoring.lda", "rtsearch.libsearch", "rtsearch.libengine",
    "rtsearch.libtable", "rtsearch.scoring.library_gpu", "rtsearch.scoring.library_kernels",
    "rtsearch.scoring.preprocess_kernel", "rtsearch.offline",
]  # fmt: skip
SHELL_ONLY = ("asyncio", "zmq", "aiomqtt", "paho", "prometheus_client")


def test_core_imports_no_shell_library() -> None:
    code = (
        f"import sys\nfor m in {CORE!r}: __import__(m)\n"
        f"print(','.join(m for m in {SHELL_ONLY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the core pulled in: {out.stdout.strip()}"
