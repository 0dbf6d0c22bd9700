"""Runs spread over lane daemons (``rtsearch serve --lanes 2``): every spectrum answered once through the front,
each run on one lane, the lanes' metrics merged, each run's summary on MQTT (each lane its own client of a private
Mosquitto), and each run's results file what one daemon writes for it.

The front runs as deployed (``rtsearch serve`` in a process of its own, two lanes each a process, two routers);
the reference is one daemon in this test's event loop on the same target and settings. Four runs of the E. coli
dev run (MS1 and MS2): two sent one message a spectrum, two in batched ``spectra`` messages (both topics routed).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtsearch.cli.demo import TOML, bundled
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, replay
from tests.integration.test_crash_recovery import alive, children
from tests.integration.test_mqtt import Listener, _wait
from tests.integration.test_overload_client import _mgf
from tests.streaming import ServeProcess, free_port, mosquitto, running, scrape, serve_config

RUNS = ("lane-a", "lane-b", "lane-c", "lane-d")


def _send(spectra: str, results: str, run: list) -> tuple[Sent, Collector]:  # type: ignore[type-arg]
    """The four runs: two a message a spectrum, two in batched messages; every answer collected."""
    col = Collector(results).start()
    sent = Sent()
    with Sender(spectra, mode="push", wait_s=20) as s:
        replay(s, [(RUNS[0], run), (RUNS[1], run)], speed=None, rate=4000, sent=sent)
        replay(s, [(RUNS[2], run), (RUNS[3], run)], speed=None, rate=4000, batch=16, sent=sent)
    col.wait(len(sent.ms2), idle_s=30, timeout_s=300)
    col.stop()
    return sent, col


def _psms(folder: Path, run: str) -> dict[tuple[str, str], tuple[str, str, str]]:
    """A results file's rows by (scan, rank): peptide, proteins, q-value."""
    with open(folder / f"{run}.tsv", newline="") as fh:
        return {(r["scan"], r["rank"]): (r["peptide"], r["proteins"], r["q_value"])
                for r in csv.DictReader(fh, delimiter="\t")}  # fmt: skip


@pytest.mark.asyncio
async def test_runs_spread_over_two_lanes(demo_index, ecoli_run, engine, tmp_path):
    sp, rp, port = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}", free_port()
    broker = mosquitto(tmp_path)
    mqtt = broker.__enter__()
    listener = Listener(mqtt.port, "lab2")
    front = ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend", "numpy",
                          "--spectra", sp, "--spectra-mode", "pull", "--results", rp, "--metrics-port", str(port),
                          "--results-dir", str(tmp_path / "lanes"), "--lanes", "2", "--intakes", "1", "--mqtt",
                          f"127.0.0.1:{mqtt.port}", "--instrument", "lab2"])  # fmt: skip
    try:
        assert front.wait_for(" ready: ", 180), front.log
        assert "2 lanes, 1 intake processes" in front.log
        sent, col = await asyncio.to_thread(_send, sp, rp, ecoli_run)
        report = col.report(sent.ms2)
        assert report.lost == 0 and report.duplicates == 0, report
        assert report.by_status.get("shed", 0) == 0 and report.by_status.get("identified", 0) > 0, report
        metrics = scrape(port)
        # the registry gave each lane two runs, and what the lanes published adds up to every answer
        assert metrics['rtsearch_lane_runs_total{lane="0"}'] == metrics['rtsearch_lane_runs_total{lane="1"}'] == 2
        published = {lane: sum(v for k, v in metrics.items() if k.startswith("rtsearch_results_total{")
                               and f'lane="{lane}"' in k) for lane in "01"}  # fmt: skip
        assert published["0"] > 0 and published["1"] > 0
        assert published["0"] + published["1"] == len(sent.ms2)
        assert 'process_cpu_seconds_total{lane="front"}' in metrics
        # each run's summary from its lane's MQTT client, with every MS2 spectrum of the run counted
        summaries = [f"rtsearch/lab2/{run}/summary" for run in RUNS]
        assert await asyncio.to_thread(_wait, lambda: all(listener.on(t) for t in summaries), 60), listener.messages
        for run, topic in zip(RUNS, summaries, strict=True):
            (summary,) = [json.loads(p) for p in listener.on(topic)]
            assert summary["run"] == run and summary["spectra"] == sum(1 for r, _ in sent.ms2 if r == run)
            assert listener.on(f"rtsearch/lab2/{run}/psm"), run
    finally:
        front.proc.send_signal(signal.SIGTERM)
        code = front.proc.wait(120)
        listener.stop()
        broker.__exit__(None, None, None)
    assert code == 0, front.log[-3000:]
    # the reference: one daemon, the same runs
    async with running(engine, serve_config(tmp_path, results_dir=str(tmp_path / "one"))) as daemon:
        ref_sent, ref_col = await asyncio.to_thread(_send, daemon.endpoints.spectra, daemon.endpoints.results,
                                                    ecoli_run)  # fmt: skip
    assert ref_col.report(ref_sent.ms2).lost == 0
    for run in RUNS:
        lanes, one = _psms(tmp_path / "lanes", run), _psms(tmp_path / "one", run)
        assert lanes == one, run
        assert sum(1 for _, _, q in lanes.values() if q and float(q) <= 0.05) > 50, run  # no list at 1 %: 139 spectra


def _lane_pid(front_pid: int, lane: int) -> int | None:
    """The process of lane ``lane`` started by the front ``front_pid`` (from /proc: its name is ``lane_K``)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            comm = (proc / "comm").read_text().strip()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == front_pid and comm == f"lane_{lane}":
            return int(proc.name)
    return None


def test_a_lane_that_dies_stops_the_front_with_a_clear_error(demo_index, tmp_path):
    front = ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend", "numpy",
                          "--spectra", f"tcp://127.0.0.1:{free_port()}", "--spectra-mode", "pull", "--results",
                          f"tcp://127.0.0.1:{free_port()}", "--metrics-port", "0", "--results-dir", str(tmp_path),
                          "--lanes", "2", "--intakes", "1"])  # fmt: skip
    try:
        assert front.wait_for(" ready: ", 180), front.log
        pid = _lane_pid(front.proc.pid, 1)
        assert pid is not None, front.log
        os.kill(pid, signal.SIGKILL)
        code = front.proc.wait(120)
    finally:
        front.kill()
    assert code != 0
    assert "lane(s) [1] exited" in front.log, front.log[-3000:]
    assert _lane_pid(front.proc.pid, 0) is None  # the other lane was stopped, not left behind


def test_lanes_under_overload_answer_every_spectrum_once_and_book_it(demo_index, shared_tools, tmp_path):
    """The shared client at many times what two NumPy lanes score, with a 20 ms budget: most spectra are answered
    ``shed`` at the lanes' doors by the front's intake processes, every one exactly once, and each run's results
    file still holds a row for every spectrum its lane was sent."""
    mgf = tmp_path / "run.mgf"
    _mgf(mgf)
    sp, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    front = ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend", "numpy",
                          "--spectra", sp, "--spectra-mode", "pull", "--results", rp, "--metrics-port", "0",
                          "--results-dir", str(tmp_path / "res"), "--lanes", "2", "--intakes", "1",
                          "--budget-ms", "20"])  # fmt: skip
    try:
        assert front.wait_for(" ready: ", 180), front.log
        proc = subprocess.run(
            [sys.executable, str(shared_tools / "rt_load.py"), str(mgf), "--spectra", sp, "--results", rp, "--rates",
             "20000", "--seconds", "1.5", "--senders", "2", "--budget-ms", "20", "--drain", "30", "--tag", "over"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    finally:
        front.proc.send_signal(signal.SIGTERM)
        code = front.proc.wait(120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (load,) = [json.loads(x) for x in proc.stdout.splitlines() if '"offered_hz"' in x]
    print(f"\n2 lanes at 20,000/s: {load}")
    assert load["lost"] == 0 and load["duplicates"] == 0, load
    assert load["statuses"].get("shed", 0) > load["sent"] // 2, load  # most were shed, at the doors or later
    assert code == 0, front.log[-3000:]
    runs = {f"over-r20000-s{k}" for k in range(2)}
    files = {p.stem: p for p in (tmp_path / "res").glob("*.tsv")}
    assert set(files) == runs, files
    scans = {}
    for run in runs:
        with open(files[run], newline="") as fh:
            scans[run] = {r["scan"] for r in csv.DictReader(fh, delimiter="\t")}
    assert sum(map(len, scans.values())) == load["sent"], scans  # every spectrum booked in its run's file, shed too


def test_a_sigkilled_front_leaves_no_process_behind(demo_index, shared_tools, tmp_path):
    """The front SIGKILLed just after its lanes answered a load: its intake processes end with it, the lanes see
    their pipes close and shut down (their refit processes stopped first), and nothing of it is left."""
    mgf = tmp_path / "run.mgf"
    _mgf(mgf)
    sp, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    front = ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend", "numpy",
                          "--spectra", sp, "--spectra-mode", "pull", "--results", rp, "--metrics-port", "0",
                          "--results-dir", str(tmp_path / "res"), "--lanes", "2", "--intakes", "1"])  # fmt: skip
    try:
        assert front.wait_for(" ready: ", 180), front.log
        proc = subprocess.run(
            [sys.executable, str(shared_tools / "rt_load.py"), str(mgf), "--spectra", sp, "--results", rp, "--rates",
             "400", "--seconds", "2", "--senders", "2", "--drain", "30", "--tag", "kill"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        family = children(front.proc.pid)
        assert _lane_pid(front.proc.pid, 0) in family and _lane_pid(front.proc.pid, 1) in family
    finally:
        front.kill()
        front.proc.wait(30)
    deadline = time.monotonic() + 60
    while any(alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {p: Path(f"/proc/{p}/comm").read_text().strip() for p in family if alive(p)}
    for p in left:  # not to disturb the next tests
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)
    assert not left, (left, front.log[-3000:])


def test_lanes_that_cannot_open_their_target_stop_the_front_with_a_clear_error(tmp_path):
    front = ServeProcess(["--index", str(tmp_path / "no-such-index"), "--backend", "numpy", "--spectra",
                          f"tcp://127.0.0.1:{free_port()}", "--spectra-mode", "pull", "--results",
                          f"tcp://127.0.0.1:{free_port()}", "--metrics-port", "0", "--results-dir", str(tmp_path),
                          "--lanes", "2"])  # fmt: skip
    try:
        code = front.proc.wait(120)
    finally:
        front.kill()
    assert code != 0, front.log[-3000:]
    assert "not an rtsearch index" in front.log and "exited with 2 while starting" in front.log, front.log[-3000:]


async def _four_runs_killing(sp: str, rp: str, pid: int, run: list) -> None:  # type: ignore[type-arg]
    """The four runs sent at 150 /s, ``pid`` SIGKILLed after the first two: every spectrum answered once."""
    col = Collector(rp).start()
    sent = Sent()
    with Sender(sp, mode="push", wait_s=20) as s:
        await asyncio.to_thread(replay, s, [(RUNS[0], run), (RUNS[1], run)], speed=None, rate=150, sent=sent)
        os.kill(pid, signal.SIGKILL)
        await asyncio.to_thread(replay, s, [(RUNS[2], run), (RUNS[3], run)], speed=None, rate=150, sent=sent)
    await asyncio.to_thread(col.wait, len(sent.ms2), idle_s=30, timeout_s=300)
    col.stop()
    report = col.report(sent.ms2)
    assert report.lost == 0 and report.duplicates == 0, report
    assert report.by_status.get("identified", 0) > 0, report


@pytest.mark.asyncio
async def test_lanes_each_scoring_through_a_cluster_of_their_own_lose_nothing_when_a_worker_dies(
    demo_index, ecoli_run, tmp_path
):
    """``--lanes 2 --cluster 1``: each lane a daemon whose batches go to its own cluster worker (on its own GPU,
    where there are several). A lane's worker SIGKILLed mid-run: restarted, its batches sent again, every
    spectrum of the four runs answered once."""
    sp, rp, port = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}", free_port()
    front = ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend", "numpy",
                          "--spectra", sp, "--spectra-mode", "pull", "--results", rp, "--metrics-port", str(port),
                          "--results-dir", str(tmp_path), "--lanes", "2", "--intakes", "1",
                          "--cluster", "1"])  # fmt: skip
    try:
        assert front.wait_for(" ready: ", 240), front.log
        # one worker a lane (the lanes write their logs themselves: the second's line may come after "ready")
        assert front.wait_for("cluster: w0 up (pid ", 30, count=2), front.log
        workers = [int(pid) for pid in re.findall(r"cluster: w0 up \(pid (\d+)", front.log)]
        assert len(workers) == 2, front.log
        await _four_runs_killing(sp, rp, workers[0], ecoli_run)  # a third of the way through the four runs
        # the killed worker was called dead (or came back first) and a new one said hello in its lane
        called = r"cluster: w0 (exited \(pid \d+\): dead|silent for [\d.]+ s: dead|back \(pid)"
        assert re.search(called, front.log), front.log[-3000:]
        assert await asyncio.to_thread(_wait, lambda: len(re.findall(r"cluster: w0 up", front.log)) == 3, 60)
        metrics = scrape(port)
        scored = {k: v for k, v in metrics.items() if k.startswith("rtsearch_cluster_spectra_total{")}
        assert len(scored) == 2 and all(v > 0 for v in scored.values()), scored  # both lanes' workers scored
    finally:
        front.proc.send_signal(signal.SIGTERM)
        code = front.proc.wait(120)
    assert code == 0, front.log[-3000:]


def _labels(series: str) -> dict[str, str]:
    """The labels of a scraped series' name: ``name{a="1",b="x"}`` → {"a": "1", "b": "x"}."""
    return dict(re.findall(r'(\w+)="([^"]*)"', series))


@pytest.mark.asyncio
async def test_lanes_sharing_one_partition_lose_nothing_when_a_worker_dies(demo_index, ecoli_run, tmp_path):
    """``--lanes 2 --cluster 2 --cluster-mode partition --lane-workers shared``: two workers in all (not two a
    lane), each holding its piece once and scoring what both lanes send it. One SIGKILLed mid-run: lane 0 restarts
    it, it says hello to both lanes, each sends its batches again; every spectrum of the four runs answered once,
    both workers and both lanes scoring, and the front stops cleanly."""
    sp, rp, port = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}", free_port()
    front = ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend", "numpy",
                          "--spectra", sp, "--spectra-mode", "pull", "--results", rp, "--metrics-port", str(port),
                          "--results-dir", str(tmp_path), "--lanes", "2", "--intakes", "1", "--cluster", "2",
                          "--cluster-mode", "partition", "--lane-workers", "shared"])  # fmt: skip
    try:
        assert front.wait_for(" ready: ", 240), front.log
        up = re.findall(r"cluster: (w\d) up \(pid (\d+)", front.log)
        assert len(up) == 4 and len(set(up)) == 2, front.log  # two workers, each up in both lanes' doors
        await _four_runs_killing(sp, rp, int(dict(up)["w0"]), ecoli_run)
        # restarted once, by lane 0 alone, and back in both lanes' doors
        assert await asyncio.to_thread(_wait, lambda: len(re.findall(r"cluster: w0 up", front.log)) == 4, 60)
        assert len({pid for name, pid in re.findall(r"cluster: (w\d) up \(pid (\d+)", front.log) if name == "w0"}) == 2
        metrics = scrape(port)
        scored = {k: v for k, v in metrics.items() if k.startswith("rtsearch_cluster_spectra_total{")}
        # both workers scored, and both lanes through the shared workers (which lane's batch meets which piece
        # first is the machine's pace, not a guarantee)
        by = {f"{side}{m[side]}": 0.0 for k in scored for m in [_labels(k)] for side in ("lane", "worker")}
        for k, v in scored.items():
            by[f"lane{_labels(k)['lane']}"] += v
            by[f"worker{_labels(k)['worker']}"] += v
        assert sorted(by) == ["lane0", "lane1", "workerw0", "workerw1"] and all(v > 0 for v in by.values()), scored
        deaths = {k: v for k, v in metrics.items() if k.startswith("rtsearch_cluster_worker_deaths_total{")}
        assert sum(deaths.values()) == 1, deaths  # one worker killed once: counted by the lane that restarts it
    finally:
        front.proc.send_signal(signal.SIGTERM)
        code = front.proc.wait(120)
    assert code == 0, front.log[-3000:]
    end = front.log[front.log.index("shutting down"):]  # the workers stop when both lanes said so, not restarted
    assert "cluster: w0 stopped" in end and "cluster: w1 stopped" in end, end
    assert "restarting" not in end and "shutdown bound" not in end, end
