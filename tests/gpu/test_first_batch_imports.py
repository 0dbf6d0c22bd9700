"""The batches' pinned staging buffer (`Backend.to_device` of an array of `PINNED_MIN_BYTES` or more) imports no
cupyx: ``cupyx.empty_pinned`` did, and cupyx's package imports cupyx.scipy and, where SciPy is installed,
scipy.sparse, Cython and numpy.f2py — ~0.1 s of a process's first batch on the GPU machine (the first batch's
pack+preprocess stage 0.109 → 0.011 s without it, 2026-11-28). ``cupyx`` itself is in
``sys.modules`` once CuPy is imported (a lazy module CuPy makes): what shows that it ran is ``cupyx.scipy``.

Other paths of a first large batch still import it (CuPy's two-array indexing in `Engine.match_probability` among
them); this test holds the staging buffer to what it fixed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def test_the_staging_buffer_imports_no_cupyx_scipy() -> None:
    code = textwrap.dedent("""
        import json, sys
        import numpy as np
        from rtsearch.scoring.backend import PINNED_MIN_BYTES, get_backend
        backend = get_backend("cupy")
        before = sorted(m for m in sys.modules if m.startswith(("cupyx.", "scipy")))
        backend.begin_batch()
        host = np.arange(4 * PINNED_MIN_BYTES // 8, dtype=np.float64)  # through the staging buffer
        dev = backend.to_device(host)
        same = bool((backend.to_host(dev) == host).all())
        after = sorted(m for m in sys.modules if m.startswith(("cupyx.", "scipy")))
        print(json.dumps([same, before, after]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    same, before, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert same
    assert before == [] and after == []
