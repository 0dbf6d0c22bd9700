"""SIGTERM mid-run on a real `rtsearch serve` process: intake closes, everything received is answered,
the open run's results file is written, exit code 0 within the bound."""

from __future__ import annotations

import csv
import dataclasses
import signal
import time

from rtsearch.cli import main
from rtsearch.cli.demo import FASTA, TOML, bundled
from rtsearch.protocol.wire import encode_run_start, encode_spectrum
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, load_run
from tests.streaming import ServeProcess, free_port, scrape


def test_sigterm_mid_run_answers_everything_and_writes_results(tmp_path, data):
    idx = tmp_path / "idx"
    assert main(["index", "build", "--fasta", str(bundled(FASTA)), "--config", str(bundled(TOML)),
                 "--out", str(idx)]) == 0  # fmt: skip
    spectra_port, results_port, metrics_port = free_port(), free_port(), free_port()
    serve = ServeProcess(
        ["--index", str(idx), "--config", str(bundled(TOML)), "--spectra", f"tcp://127.0.0.1:{spectra_port}",
         "--spectra-mode", "pull", "--results", f"tcp://127.0.0.1:{results_port}", "--metrics-port",
         str(metrics_port), "--backend", "numpy", "--results-dir", str(tmp_path / "res"), "--max-batch", "16"],
    )  # fmt: skip
    proc = serve.proc
    try:
        assert serve.wait_for(" ready: ", 120), serve.log
        run = load_run(data / "ecoli-small/Ecoli_MS2_small.mzML")
        col = Collector(f"tcp://127.0.0.1:{results_port}").start()
        sent = Sent()
        # run.start and every spectrum, but no run.end: the run is still open at SIGTERM
        with Sender(f"tcp://127.0.0.1:{spectra_port}", mode="push") as s:
            s.send(encode_run_start("open-run"))
            for sp in run:
                s.send(encode_spectrum(dataclasses.replace(sp, run="open-run")))
                sent.ms2.append(("open-run", sp.scan))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = scrape(metrics_port)
            if m['rtsearch_spectra_received_total{ms_level="2"}'] == len(sent.ms2):
                break
            time.sleep(0.02)
        answered_at_signal = col.count()
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        elapsed = time.monotonic() - t0
        col.wait(len(sent.ms2), idle_s=5, timeout_s=30)
        col.stop()
    finally:
        serve.kill()
    assert code == 0, serve.log
    assert elapsed < 30
    assert answered_at_signal < len(sent.ms2), "SIGTERM came after everything was answered: not mid-run"
    report = col.report(sent.ms2)
    assert report.lost == 0 and report.sent == 139
    with open(tmp_path / "res" / "open-run.tsv", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == 139
    assert "shutting down" in serve.log
