"""`rtsearch serve --library` on the GPU: BSA1 replayed, every spectrum answered with the NumPy search's entry."""

from __future__ import annotations

import pytest

from rtsearch.library.store import import_library, load_library
from rtsearch.scoring.backend import get_backend
from rtsearch.search.library import LibraryTarget
from rtsearch.search.offline import search_runs
from rtsearch.types import Tolerance
from rtsearch_sim.replay import load_run
from tests.streaming import replay_through, running, serve_config

pytestmark = pytest.mark.gpu


@pytest.mark.asyncio
@pytest.mark.parametrize("window", ["20 ppm", "500 Da"], ids=["narrow", "open"])
async def test_gpu_library_daemon_answers_like_numpy(data, tmp_path, window):
    run_path = data / "bsa-orbitrapxl/BSA1.mzML.gz"
    import_library([data / "spectral-libraries/nist-bsa_consensus.msp"], tmp_path / "lib")
    lib = load_library(tmp_path / "lib")
    tol = Tolerance.parse(window)
    iso = (0, 1) if window == "20 ppm" else (0,)
    table, _ = search_runs([run_path], LibraryTarget(lib, tol, get_backend("numpy"), isotope_errors=iso))
    cols = table.columns()
    offline = dict(zip(cols["scan"].tolist(), cols["library_id"].tolist(), strict=True))
    engine = LibraryTarget(lib, tol, get_backend("cupy"), isotope_errors=iso)
    spectra = load_run(run_path)
    async with running(engine, serve_config(tmp_path, workers=2)) as daemon:

        sent, col = await replay_through(daemon, [("BSA1", spectra)], rate=5000.0, idle_s=30, timeout_s=300)
    report = col.report(sent.ms2)
    print(f"\nBSA1 from the library on the GPU ({window}): {report}")
    assert report.sent == len(offline) and report.lost == 0 and report.duplicates == 0
    online = {r["scan"]: r.get("library_id", -1) for r in col.results()}
    same = sum(online[s] == e for s, e in offline.items())
    # narrow: exactly NumPy's entries; open: ranked in half precision (tests/gpu/test_library_parity.py)
    assert same == len(offline) if window == "20 ppm" else same >= 0.99 * len(offline)
    assert engine.device_bytes() > 0
