"""SIGKILL mid-run: nothing published is lost, and no process of the daemon outlives it.

Before issue 15 a SIGKILLed daemon lost the whole run (its results existed only in memory) and
left its refit process running. Now each run's results are journaled before they are published;
a daemon started again on the same results folder finishes the run from its journal.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from rtsearch.cli import main
from rtsearch.cli.demo import FASTA, TOML, bundled
from rtsearch.protocol.wire import encode_run_start, encode_spectrum
from rtsearch.serve.runs.journal import FOLDER
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, load_run
from tests.streaming import ServeProcess, free_port


def children(pid: int) -> set[int]:
    """Every process descending from ``pid`` (Linux /proc)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parent.items() if pp == p}
        out |= kids
        todo.extend(kids)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; it only waits for its parent to read its status


def serve(idx: Path, res: Path) -> tuple[ServeProcess, str, str]:
    sp, rp = free_port(), free_port()
    proc = ServeProcess(["--index", str(idx), "--config", str(bundled(TOML)), "--spectra", f"tcp://127.0.0.1:{sp}",
                         "--spectra-mode", "pull", "--results", f"tcp://127.0.0.1:{rp}", "--metrics-port", "0",
                         "--backend", "numpy", "--results-dir", str(res), "--max-batch", "8"])  # fmt: skip
    assert proc.wait_for(" ready: ", 120), proc.log
    return proc, f"tcp://127.0.0.1:{sp}", f"tcp://127.0.0.1:{rp}"


@pytest.mark.slow
def test_sigkill_mid_run_loses_nothing_published_and_leaves_no_orphan(tmp_path, data):
    idx, res = tmp_path / "idx", tmp_path / "res"
    assert main(["index", "build", "--fasta", str(bundled(FASTA)), "--config", str(bundled(TOML)),
                 "--out", str(idx)]) == 0  # fmt: skip
    run = [dataclasses.replace(s, run="killed-run") for s in load_run(data / "ecoli-small/Ecoli_MS2_small.mzML")]
    kids: set[int] = set()
    daemon, spectra_ep, results_ep = serve(idx, res)
    try:
        kids = children(daemon.proc.pid)
        assert len(kids) >= 2, "expected the intake and refit processes"  # (and multiprocessing's tracker)
        col = Collector(results_ep).start()
        with Sender(spectra_ep, mode="push") as s:
            s.send(encode_run_start("killed-run"))
            for sp in run:
                s.send(encode_spectrum(sp))
                if col.count() >= 60:
                    break
                time.sleep(0.01)
        deadline = time.monotonic() + 30
        while col.count() < 60 and time.monotonic() < deadline:
            time.sleep(0.01)
        daemon.proc.kill()  # SIGKILL: no clean-up of any kind
        daemon.proc.wait(10)
        time.sleep(0.3)
        col.stop()
    finally:
        daemon.kill()
    published = {r["scan"]: r for r in col.results()}
    assert 60 <= len(published) < len(run), "the kill should come mid-run"
    deadline = time.monotonic() + 10
    while any(alive(p) for p in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in kids if alive(p)], "processes of the killed daemon still run"
    assert list((res / FOLDER).glob("*.rtj")), "no journal left by the killed daemon"
    assert not (res / "killed-run.tsv").exists()
    # started again on the same results folder: the run is finished from its journal (while it serves)
    again, _, _ = serve(idx, res)
    try:
        assert again.wait_for("recovered from its journal", 120), again.log
    finally:
        again.kill()
        again.proc.wait(10)
    with open(res / "killed-run.tsv", newline="") as fh:
        rows = {int(r["scan"]): r for r in csv.DictReader(fh, delimiter="\t")}
    missing = sorted(set(published) - set(rows))
    assert not missing, f"{len(missing)} published results missing from the recovered file: {missing[:5]}"
    for scan, r in published.items():  # the same match as published live
        assert rows[scan]["peptide"] == r.get("peptide", ""), scan
    assert not list((res / FOLDER).glob("*.rtj"))  # finished: its journal is gone
    runs = [f for f in os.listdir(res) if not f.endswith(".provenance.json")]  # the file's provenance beside it
    assert runs == ["killed-run.tsv"] or sorted(runs) == [FOLDER, "killed-run.tsv"]
    rec = json.loads((res / "killed-run.tsv.provenance.json").read_text())  # the recovering daemon's
    assert rec["target"]["folder"] == str(idx.resolve()) and rec["config"]["serve"]["results_dir"] == str(res)
