"""A GPU search's first batches import nothing heavy on the way: no cupyx (whose package imports cupyx.scipy and,
where SciPy is installed, scipy.sparse, Cython and numpy.f2py — 241 modules, most of the first batch's cost on the
GPU machine, bench/RESULTS.md 2026-11-28) and no SciPy. A meta-path finder in a new process records every module
looked for, installed or not."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.devruns import DEV_RUNS

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def test_scoring_batches_looks_for_no_cupyx_or_scipy(data) -> None:
    dev = DEV_RUNS[1]  # Ecoli_MS2_small: 139 spectra, batches of 16 on the search's scorer threads
    fastas, run = dev.paths(data)
    code = textwrap.dedent(f"""
        import sys
        from rtsearch.database.build import build_index
        from rtsearch.scoring.backend import get_backend
        from rtsearch.search import offline
        from rtsearch.search.database import DatabaseTarget
        from tests.devruns import DATABASE, DEV_RUNS
        index = build_index({[str(f) for f in fastas]!r}, DATABASE)
        target = DatabaseTarget(index, DEV_RUNS[1].search_config(), get_backend("cupy"))
        asked = []
        class Finder:
            def find_spec(self, name, path=None, target=None):
                asked.append(name)
        sys.meta_path.insert(0, Finder())
        table, _ = offline.search_runs([{str(run)!r}], target, batch_size=16)
        import json
        print(json.dumps([len(table.match), sorted(n for n in asked if n.split(".")[0] in ("cupyx", "scipy"))]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    rows, heavy = json.loads(out.stdout.strip().splitlines()[-1])
    assert rows == 139
    assert heavy == []
