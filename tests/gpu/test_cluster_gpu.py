"""Scale-out on the GPU machine: two CuPy workers sharing the one GPU give one CuPy engine's results files for a
dev run, in both modes (`tests/integration/test_cluster.py` does the same with three NumPy workers)."""

from __future__ import annotations

import pytest

from tests.devruns import DEV_RUNS
from tests.integration.test_cluster import same_files

pytestmark = pytest.mark.gpu


@pytest.mark.asyncio
@pytest.mark.parametrize("dev", [d for d in DEV_RUNS if d.name in ("Ecoli_MS2_small", "BSA1")], ids=lambda d: d.name)
async def test_two_gpu_workers_give_one_engines_results(dev, data, dev_indexes, tmp_path):
    await same_files(dev, data, dev_indexes, tmp_path, "cupy", 2)
