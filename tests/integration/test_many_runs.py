"""Many runs at once (issue 67, S9): each answered once and written, with a bounded number of open files, and a
daemon killed with hundreds of runs open is ready again at once and finishes them all.

An adversarial client opened 20,000 runs (half ended, half evicted by ``max_open_runs``): the daemon held a file a
run (18,485 open; under systemd's default 1,024 it died of EMFILE after 1,096 runs, 4,902 runs' published answers in
no file), and a restart with 18,432 journals took 164 s to become ready, finishing every one first. How fast runs
end is measured in ``bench/run_ends.py``; here, what must hold on any machine.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import os
import signal
from pathlib import Path

import pytest

from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.protocol.wire import encode_run_end, encode_spectrum
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.serve.runs import finish
from rtsearch.serve.runs.journal import FOLDER, MAX_OPEN
from rtsearch.types import Spectrum
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, load_run
from tests.streaming import ServeProcess, free_port, running, serve_config

RUNS = 300  # each a journal: more than the 64 files the daemon keeps open (`rtsearch.serve.runs.journal`)
MAX_OPEN_RUNS = 200  # the first 100 runs are ended to make room for the last 100
KILLED_RUNS = 200  # open when the daemon is killed: each finished from its journal by the next one


def _messages(spectrum: Spectrum, runs: range) -> list[list[bytes]]:
    """A run each: a valid spectrum and a malformed one (peaks out of order: answered ``invalid`` at once)."""
    out = []
    for k in runs:
        sp = dataclasses.replace(spectrum, run=f"many-{k}", scan=1)
        bad = dataclasses.replace(sp, scan=2, mz=sp.mz[::-1].copy())
        out += [encode_spectrum(sp), encode_spectrum(bad)]
    return out


def _send(endpoint: str, messages: list[list[bytes]]) -> None:
    with Sender(endpoint, mode="push", wait_s=30) as sender:
        for frames in messages:
            sender.send(frames)


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.slow
@pytest.mark.asyncio
async def test_many_runs_are_each_written_with_few_files_open(demo_index, data, tmp_path, monkeypatch):
    trims: list[int] = []  # the heap handed back once no run is open (a fuzzed stream's rounds crept up without)
    monkeypatch.setattr(finish, "give_back_heap", lambda: trims.append(len(daemon.runs)))
    spectrum = next(s for s in load_run(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2)
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    cfg = serve_config(tmp_path, max_open_runs=MAX_OPEN_RUNS)
    async with running(target, cfg) as daemon:
        col = Collector(daemon.endpoints.results).start()
        before = _open_files()
        await asyncio.to_thread(_send, daemon.endpoints.spectra, _messages(spectrum, range(RUNS)))
        await asyncio.to_thread(col.wait, 2 * RUNS, idle_s=60, timeout_s=900)
        open_runs = len(daemon.runs)
        assert open_runs >= MAX_OPEN_RUNS  # the runs ended to make room may still be being finished
        # a journal a run, MAX_OPEN of them open at once; the rest: sockets, the runs' files being written
        assert _open_files() - before <= MAX_OPEN + 40, (_open_files(), before)
        ends = [encode_run_end(f"many-{k}", 2) for k in range(RUNS - MAX_OPEN_RUNS, RUNS)]
        await asyncio.to_thread(_send, daemon.endpoints.spectra, ends)
        for _ in range(9000):  # every run finished: none open, none draining, none being written
            if not len(daemon.runs) and len({f.summary.run for f in daemon.finished}) == RUNS:
                break
            await asyncio.sleep(0.1)
        col.stop()
        await daemon.ends.wait(60)
        for _ in range(300):
            if trims:
                break
            await asyncio.sleep(0.1)
        assert trims == [0]  # once, with nothing open (not while the runs came and went)
    answers = [(r["run"], r["scan"], r["status"]) for r in col.results()]
    assert len(answers) == len(set(answers)) == 2 * RUNS  # each spectrum answered once
    assert sum(s == "invalid" for _, _, s in answers) == RUNS
    # a run ended to make room whose spectra the door reported after that (answered there under load) goes on in a
    # segment of its own, `many-k.part2.tsv`: each run's scans are in its files, once
    scans: dict[str, list[int]] = {}
    for path in (tmp_path / "results").glob("many-*.tsv"):
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh, delimiter="\t"):
                scans.setdefault(r["run"], []).append(int(r["scan"]))
    assert len(scans) == RUNS and all(sorted(v) == [1, 2] for v in scans.values())
    assert not list((tmp_path / "results" / FOLDER).glob("*.rtj"))


@pytest.mark.slow
def test_a_daemon_killed_with_hundreds_of_runs_open_is_ready_again_and_finishes_them(demo_index, data, tmp_path):
    spectrum = next(s for s in load_run(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2)
    res = tmp_path / "res"

    def serve() -> tuple[ServeProcess, str, str]:
        sp, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
        proc = ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend",
                             "numpy", "--spectra", sp, "--spectra-mode", "pull", "--results", rp, "--metrics-port",
                             "0", "--results-dir", str(res)])  # fmt: skip
        assert proc.wait_for(" ready: ", 180), proc.log
        return proc, sp, rp

    first, spectra_ep, results_ep = serve()
    try:
        col = Collector(results_ep).start()
        _send(spectra_ep, _messages(spectrum, range(KILLED_RUNS)))
        col.wait(2 * KILLED_RUNS, idle_s=60, timeout_s=900)
        col.stop()
        assert col.count() == 2 * KILLED_RUNS
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(30)
    finally:
        first.kill()
    assert len(list((res / FOLDER).glob("*.rtj"))) == KILLED_RUNS
    again, _, _ = serve()  # ready: it finishes the runs while it serves
    try:
        assert again.wait_for(f"{KILLED_RUNS} runs left in journals", 10), again.log
        assert again.wait_for("recovered from its journal", 900, count=KILLED_RUNS), again.log[-2000:]
    finally:
        again.proc.terminate()
        again.proc.wait(60)
    files = list(Path(res).glob("many-*.tsv"))
    assert len(files) == KILLED_RUNS and not list((res / FOLDER).glob("*.rtj"))
