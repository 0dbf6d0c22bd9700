"""docs/protocol.md's client example, run as written against a daemon on free ports."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

import pytest

from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from tests.conftest import ROOT
from tests.streaming import running, serve_config


def example_code() -> str:
    text = (ROOT / "docs" / "protocol.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return block


@pytest.mark.asyncio
async def test_the_documented_client_gets_one_result_per_spectrum(demo_index, data, tmp_path):
    script = tmp_path / "client.py"
    script.write_text(example_code())
    engine = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    async with running(engine, serve_config(tmp_path)) as daemon:
        env = {**os.environ, "RTSEARCH_SPECTRA": daemon.endpoints.spectra, "RTSEARCH_RESULTS": daemon.endpoints.results}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), str(data / "ecoli-small/Ecoli_MS2_small.mzML"), env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert len(lines) == 139
    scans = {int(line.split()[0]) for line in lines}
    assert len(scans) == 139
    identified = [line for line in lines if line.split()[1] == "identified"]
    assert len(identified) > 10  # live: none before the run holds 50 scored (`rtsearch.search.live.LIVE_FROM`)
    assert all(line.endswith(" ms") for line in lines)
