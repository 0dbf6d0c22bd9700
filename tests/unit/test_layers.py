"""The layer rule of ARCHITECTURE.md: the core never imports asyncio, ZeroMQ, MQTT or Prometheus."""

from __future__ import annotations

import subprocess
import sys

CORE = [
    "rtsearch.types", "rtsearch.spectrum", "rtsearch.search.fdr", "rtsearch.scoring.database.engine", "rtsearch.search.live", "rtsearch.search.table",
    "rtsearch.scoring.backend", "rtsearch.database.build", "rtsearch.database.store", "rtsearch.library.store",
    "rtsearch.scoring.database.features", "rtsearch.scoring.database.matching", "rtsearch.scoring.database.candidates",
    "rtsearch.scoring.library.scores", "rtsearch.search.lda", "rtsearch.search.libsearch", "rtsearch.search.library",
    "rtsearch.search.libtable", "rtsearch.scoring.library.gpu", "rtsearch.scoring.library.kernels",
    "rtsearch.scoring.database.preprocess_kernel", "rtsearch.search.offline",
]  # fmt: skip
SHELL_ONLY = ("asyncio", "zmq", "aiomqtt", "paho", "prometheus_client")


def test_core_imports_no_shell_library() -> None:
    code = (
        f"import sys\nfor m in {CORE!r}: __import__(m)\n"
        f"print(','.join(m for m in {SHELL_ONLY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the core pulled in: {out.stdout.strip()}"
