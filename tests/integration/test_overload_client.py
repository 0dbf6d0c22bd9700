"""Ten times what the machine can score, offered by the shared independent client (`rt_load.py`): nothing lost,
nothing answered twice, most of it ``shed``, and every answer within a generous bound (how soon, against the budget,
is the benchmarks' to measure: bench/daemon.py).

The daemon runs as ``rtsearch serve`` in a process of its own, as deployed. The capacity is measured first, in
the same test, on the same daemon: the bundled run replayed in batches as
fast as it is answered (every spectrum scored). Then ``rt_load.py`` offers ten times that, one message a
spectrum with a 50 ms budget, while a second subscriber (`rtsearch_sim.collector`) keeps each answer's stamps.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np

from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.io.spectra import read_spectra
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, load_run, replay
from tests.streaming import ServeProcess, free_port

BUDGET_MS = 50.0
SECONDS = 2.0


def _mgf(path) -> None:
    """The bundled run's MS2 spectra with one known charge, as MGF (what rt_load.py reads)."""
    with open(path, "w") as fh:
        for sp in read_spectra(bundled(RUN)):
            if len(sp.charges) != 1 or sp.problem:
                continue
            fh.write(f"BEGIN IONS\nTITLE=x.{sp.scan}\nSCANS={sp.scan}\nPEPMASS={sp.precursor_mz!r}\n"
                     f"CHARGE={sp.charges[0]}+\nRTINSECONDS={sp.rt!r}\n")  # fmt: skip
            fh.writelines(f"{m!r} {i!r}\n" for m, i in zip(sp.mz.tolist(), sp.intensity.tolist(), strict=True))
            fh.write("END IONS\n")


def _capacity(spectra_ep: str, results_ep: str) -> float:
    """Spectra scored a second: three passes of the bundled run in batches, a window in flight, no shedding."""
    run = [s for s in load_run(bundled(RUN)) if s.ms_level == 2]
    col = Collector(results_ep).start()
    sent = Sent()
    with Sender(spectra_ep, mode="push", wait_s=20) as s:
        replay(s, [(f"cap{k}", run) for k in range(3)], speed=None, rate=math.inf, batch=32, window=256,
               answered=col.count, budget_ms=600_000.0, sent=sent)  # fmt: skip
    col.wait(len(sent.ms2), idle_s=20, timeout_s=120)
    col.stop()
    report = col.report(sent.ms2, first_ns=sent.first_ns)
    assert report.lost == 0 and report.by_status.get("shed", 0) == 0, report
    return report.throughput


def test_ten_times_capacity_from_the_shared_client(demo_index, shared_tools, tmp_path):
    mgf = tmp_path / "run.mgf"
    _mgf(mgf)
    sp, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    daemon = ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend", "numpy",
                           "--spectra", sp, "--spectra-mode", "pull", "--results", rp, "--metrics-port", "0",
                           "--results-dir", str(tmp_path / "res"), "--budget-ms", str(BUDGET_MS), "--intakes", "1"])
    try:
        assert daemon.wait_for(" ready: ", 120), daemon.log
        capacity = _capacity(sp, rp)
        rate = 10 * capacity
        col = Collector(rp).start()
        proc = subprocess.run(
            [sys.executable, str(shared_tools / "rt_load.py"), str(mgf), "--spectra", sp, "--results", rp, "--rates",
             f"{rate:.0f}", "--seconds", str(SECONDS), "--senders", "2", "--budget-ms", str(BUDGET_MS), "--drain",
             "20", "--tag", "tenfold"], capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        col.stop()
    finally:
        daemon.proc.terminate()
        daemon.proc.wait(60)
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, err[-2000:]
    (load,) = [json.loads(x) for x in out.splitlines() if '"offered_hz"' in x]
    print(f"\ncapacity {capacity:,.0f}/s; rt_load at {rate:,.0f}/s: {load}")
    assert load["achieved_send_hz"] > 5 * capacity, ("the client could not offer the load", load)
    assert load["sent"] > 0 and load["lost"] == 0 and load["duplicates"] == 0, load
    assert load["statuses"].get("shed", 0) > load["sent"] / 2  # most of it could not be scored in time
    # bounded: the slowest answer far inside the time a daemon that did not shed would need to drain the backlog
    # (`sent / capacity`: ~18 s). Most of what it waits is the client's, on a 2-core machine shared with it: spectra
    # waiting to be read and answers waiting for its receiver; 142-303 ms in four runs here (2026-11-28), 982 ms once
    # in CI.
    backlog_ms = 1e3 * load["sent"] / capacity
    assert load["latency_ms"]["max"] < 0.25 * backlog_ms, (load["latency_ms"], backlog_ms)
    answers = [r for r in col.results() if str(r.get("run", "")).startswith("tenfold")]
    shed = [r for r in answers if r["status"] == "shed"]
    assert len({(r["run"], r["scan"]) for r in answers}) == load["answered"]
    inside = np.array([(r["published_ns"] - r["received_ns"]) / 1e6 for r in shed])
    print("shed: from receipt to published, ms p50 / p99 / p99.9 / max",
          np.percentile(inside, [50, 99, 99.9, 100]).round(2), "late", int((inside >= BUDGET_MS).sum()), len(inside))
    # shed answers from receipt to publication: printed above, not asserted — how many come within their 50 ms
    # budget is the machine's speed (a busy 2-core machine stalls threads for 100 ms and more), which is bench's to
    # measure; what must hold anywhere is that each is answered once, and none held back for long
    assert shed and inside.max() < 20 * BUDGET_MS, np.sort(inside)[-20:]
