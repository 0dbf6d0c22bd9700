"""`rtsearch-sim` as a user runs it: a report as JSON against a daemon, a clear error without one."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from tests.streaming import free_port, running, serve_config


def _sim(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rtsearch_sim.cli", *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.mark.parametrize("mode", ["push", "pub"])
def test_no_daemon_is_one_clear_error(mode):
    proc = _sim("replay", str(bundled(RUN)), "--mode", mode, "--endpoint", f"tcp://127.0.0.1:{free_port()}",
                "--wait", "1", "--rate", "1000")  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("rtsearch-sim: error: no ")
    assert "Traceback" not in proc.stderr


@pytest.mark.asyncio
@pytest.mark.parametrize("pace", [["--rate", "1000"], ["--rate", "max", "--batch", "50"]])
async def test_replay_with_collect_writes_the_report(pace, demo_index, tmp_path):
    """At a fixed rate one message a spectrum; at ``--rate max`` batches of 50 (``spectra`` messages, answered in
    ``batch.results``): the same report either way."""
    engine = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    out = tmp_path / "report.json"
    async with running(engine, serve_config(tmp_path)) as daemon:
        proc = await asyncio.to_thread(
            _sim, "replay", str(bundled(RUN)), "--mode", "push", "--endpoint", daemon.endpoints.spectra,
            *pace, "--loop", "2", "--collect", daemon.endpoints.results, "--json", str(out),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["sent"] == report["answered"] == 2 * 139 and report["lost"] == 0
    assert set(report["latency_ms"]) == {"p50", "p90", "p99", "max", "mean"}
    assert report["latency_ms"]["p50"] <= report["latency_ms"]["p99"] <= report["latency_ms"]["max"]
    assert "lost 0" in proc.stdout
    assert sorted(f.path.name for f in daemon.finished) == ["Ecoli_MS2_small.loop2.tsv", "Ecoli_MS2_small.tsv"]


@pytest.mark.parametrize(("args", "says"), [(["--rate", "fast"], "expected spectra per second or 'max'"),
                                            (["--rate", "max", "--batch", "0"], "--batch must be"),
                                            (["--rate", "max"], "needs --collect")])
def test_bad_pacing_is_one_clear_error(args, says):
    proc = _sim("replay", str(bundled(RUN)), "--mode", "push", "--endpoint", f"tcp://127.0.0.1:{free_port()}",
                "--wait", "1", *args)  # fmt: skip
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr
