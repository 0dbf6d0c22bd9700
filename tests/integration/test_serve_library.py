"""`rtsearch serve --library` as a process: ready, every spectrum answered with library scores, results at run.end."""

from __future__ import annotations

import csv
import signal

from rtsearch.library.store import import_library
from rtsearch.protocol.wire import encode_run_end, encode_run_start, encode_spectrum
from rtsearch.search.library import LibraryTarget
from rtsearch.search.table import result_columns
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, load_run
from tests.streaming import ServeProcess, free_port


def test_serve_library_cli(tmp_path, data):
    import_library([data / "spectral-libraries/nist-bsa_consensus.msp"], tmp_path / "lib")
    spectra_port, results_port = free_port(), free_port()
    serve = ServeProcess(
        ["--library", str(tmp_path / "lib"), "--spectra", f"tcp://127.0.0.1:{spectra_port}", "--spectra-mode", "pull",
         "--results", f"tcp://127.0.0.1:{results_port}", "--metrics-port", "0", "--backend", "numpy",
         "--results-dir", str(tmp_path / "res")],
    )  # fmt: skip
    try:
        assert serve.wait_for(" ready: ", 120), serve.log
        run = load_run(data / "bsa-orbitrapxl/BSA1.mzML.gz")
        col = Collector(f"tcp://127.0.0.1:{results_port}").start()
        sent = Sent()
        with Sender(f"tcp://127.0.0.1:{spectra_port}", mode="push") as s:
            s.send(encode_run_start("BSA1"))
            for sp in run:
                s.send(encode_spectrum(sp))
                if sp.ms_level == 2:
                    sent.ms2.append(("BSA1", sp.scan))
            s.send(encode_run_end("BSA1", len(run)))
        col.wait(len(sent.ms2), idle_s=10, timeout_s=120)
        col.stop()
        assert serve.wait_for("run 'BSA1' finished", 60), serve.log
        serve.proc.send_signal(signal.SIGTERM)
        code = serve.proc.wait(60)
    finally:
        serve.kill()
    assert code == 0, serve.log
    report = col.report(sent.ms2)
    assert report.lost == 0 and report.sent == 1120
    scored = [r for r in col.results() if r.get("peptide")]
    assert len(scored) > 100 and all({"library_id", "dot", "dot_bias", "delta_dot", "f_value"} <= r.keys()
                                     for r in scored)  # fmt: skip
    with open(tmp_path / "res" / "BSA1.tsv", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == 1120 and tuple(rows[0]) == result_columns(LibraryTarget)
    at_5pct = sum(r["is_decoy"] == "false" and r["q_value"] != "" and float(r["q_value"]) <= 0.05 for r in rows)
    assert at_5pct >= 90  # the offline library search of BSA1 finds 121 at 5 % (none at 1 %: 163 targets)
