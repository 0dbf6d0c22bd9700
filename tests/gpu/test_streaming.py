"""The daemon on the GPU: worker threads on their own CUDA streams, pinned staging, same answers as NumPy."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.engine import Engine
from rtsearch.search.database import DatabaseTarget
from rtsearch_sim.replay import load_run
from tests.streaming import replay_through, running, serve_config

pytestmark = pytest.mark.gpu


def test_pinned_staging_round_trip_on_worker_streams():
    gpu = get_backend("cupy")
    rng = np.random.default_rng(3)
    arrays = [rng.normal(size=n) for n in (10, 100_000, 300_000)]  # below and above the staging threshold
    out: dict[int, list[np.ndarray]] = {}

    def work(k: int) -> None:
        gpu.bind_worker()
        assert gpu.xp.cuda.get_current_stream() != gpu.xp.cuda.Stream.null
        res = []
        for _ in range(3):
            gpu.begin_batch()
            dev = [gpu.to_device(a * (k + 1)) for a in arrays]
            res = [gpu.to_host(d) for d in dev]
        out[k] = res

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        for a, b in zip(arrays, out[k], strict=True):
            np.testing.assert_array_equal(a * (k + 1), b)


@pytest.mark.asyncio
async def test_gpu_daemon_answers_like_the_numpy_engine(demo_index, data, tmp_path):
    search = load_config(bundled(TOML)).search
    spectra = load_run(data / "ecoli-small/Ecoli_MS2_small.mzML")
    ms2 = SpectraBatch.of([s for s in spectra if s.ms_level == 2])
    ref = Engine(demo_index, search, get_backend("numpy")).score(ms2)
    pairs = zip(ref.scan, ref.best.match, strict=True)
    expected = {int(s): (demo_index.proforma(int(p)) if p >= 0 else "") for s, p in pairs}
    engine = DatabaseTarget(demo_index, search, get_backend("cupy"))
    async with running(engine, serve_config(tmp_path, max_batch=16)) as daemon:

        sent, col = await replay_through(daemon, [("gpu", spectra)], rate=5000.0, idle_s=20, timeout_s=120)
    assert col.report(sent.ms2).lost == 0
    online = {r["scan"]: r.get("peptide") or "" for r in col.results()}
    assert online == expected
