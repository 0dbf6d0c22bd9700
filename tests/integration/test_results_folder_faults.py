"""A results folder that fails the daemon (issue 67, S6-S8): every spectrum is still answered, nothing published is
missing from the files once the folder takes them again, a full folder is said at start, and one folder serves one
daemon.

An adversarial client made the folder immutable mid-run (``chattr +i``) and filled its disk: a new run's journal
could not be made and the daemon shut down, 3 received spectra were never answered and 3,795 published answers were
in no file after the restart; on a full disk the results thread died (~492 spectra unanswered), and a restart while
still full said "internal error". A second daemon on the same folder "recovered" the first's live journal and
deleted it. The faults here are injected where the journal calls the operating system (`tests.disk_faults`), as
EPERM and ENOSPC, in a daemon serving in this process.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import os
from pathlib import Path

import pytest

from rtsearch.cli import main
from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.protocol.wire import encode_run_end, encode_spectrum
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, load_run
from tests.disk_faults import Disk
from tests.streaming import ServeProcess, free_port, running, serve_config


def _send(endpoint: str, messages: list[list[bytes]]) -> None:
    with Sender(endpoint, mode="push", wait_s=20) as sender:
        for frames in messages:
            sender.send(frames)


def _scans(folder: Path, run: str) -> list[int]:
    out: list[int] = []
    for path in sorted(folder.glob(f"{run}*.tsv")):
        with open(path, newline="") as fh:
            out += [int(r["scan"]) for r in csv.DictReader(fh, delimiter="\t")]
    return out


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("fault", ["frozen", "full"])
async def test_a_folder_that_fails_mid_run_loses_no_answer(demo_index, data, tmp_path, monkeypatch, fault):
    spectra = [s for s in load_run(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2][:60]
    faults = Disk(monkeypatch)
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))

    def msgs(run: str, part: list) -> list[list[bytes]]:
        return [encode_spectrum(dataclasses.replace(s, run=run)) for s in part]

    cfg = serve_config(tmp_path, max_batch=8)
    async with running(target, cfg) as daemon:
        col = Collector(daemon.endpoints.results).start()
        ends = daemon.endpoints
        await asyncio.to_thread(_send, ends.spectra, msgs("before", spectra[:20]))
        await asyncio.to_thread(col.wait, 20, idle_s=30, timeout_s=300)
        setattr(faults, fault, True)  # the folder fails: the run goes on, and a new run starts
        await asyncio.to_thread(_send, ends.spectra, msgs("before", spectra[20:40]) + msgs("during", spectra[:30]))
        await asyncio.to_thread(col.wait, 70, idle_s=30, timeout_s=300)
        metric = daemon.metrics.registry.get_sample_value
        assert metric("rtsearch_ready") == 1
        assert metric("rtsearch_journal_write_failures_total") > 0 and metric("rtsearch_journal_backlog_bytes") > 0
        setattr(faults, fault, False)  # writable again
        await asyncio.to_thread(_send, ends.spectra, [*msgs("before", spectra[40:60]), *msgs("during", spectra[30:40]),
                                                      encode_run_end("before", 60), encode_run_end("during", 40)])
        await asyncio.to_thread(col.wait, 100, idle_s=30, timeout_s=300)
        col.stop()
        for _ in range(600):
            if len(daemon.finished) == 2:
                break
            await asyncio.sleep(0.1)
        assert metric("rtsearch_journal_backlog_bytes") == 0
    answers = [(r["run"], r["scan"]) for r in col.results()]
    assert sorted(answers) == sorted({*answers}) and len(answers) == 100  # each spectrum answered once
    results = tmp_path / "results"
    assert sorted(_scans(results, "before")) == sorted(s.scan for s in spectra[:60])
    assert sorted(_scans(results, "during")) == sorted(s.scan for s in spectra[:40])


def test_a_full_results_folder_is_said_at_start(demo_index, tmp_path, monkeypatch, capsys):
    """One line, exit code 2: the folder and how much room it has (a restart on a full disk said "internal
    error")."""
    from rtsearch.serve.runs import finish

    full = os.statvfs_result((4096, 4096, 1 << 20, 0, 0, 1000, 0, 0, 0, 255))  # no block free
    monkeypatch.setattr(finish.os, "statvfs", lambda _: full)
    code = main(["serve", "--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend", "numpy",
                 "--spectra", "tcp://127.0.0.1:*", "--spectra-mode", "pull", "--results", "tcp://127.0.0.1:*",
                 "--metrics-port", "0", "--results-dir", str(tmp_path / "res")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("rtsearch: error: results folder full:") or "results folder full:" in err[-1], err
    assert "Traceback" not in "\n".join(err)


@pytest.mark.slow
def test_a_second_daemon_on_the_same_folder_refuses_to_start(demo_index, tmp_path):
    def serve() -> ServeProcess:
        return ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend",
                             "numpy", "--spectra", f"tcp://127.0.0.1:{free_port()}", "--spectra-mode", "pull",
                             "--results", f"tcp://127.0.0.1:{free_port()}", "--metrics-port", "0", "--results-dir",
                             str(tmp_path / "res")])  # fmt: skip

    first = serve()
    try:
        assert first.wait_for(" ready: ", 180), first.log
        second = serve()
        try:
            assert second.proc.wait(180) == 2, second.log
            assert "in use by another rtsearch daemon" in second.log and f"pid {first.proc.pid}" in second.log
            assert "Traceback" not in second.log
        finally:
            second.kill()
        assert first.proc.poll() is None  # the first serves on, its journals its own
    finally:
        first.proc.terminate()
        first.proc.wait(60)
