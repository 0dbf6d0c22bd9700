"""Elution events from the daemon (``[serve] elution``): BSA1's MS1 and MS2 replayed in acquisition order
through the simulator; an ``elution`` apex and end for most identified precursors, their apexes against the
offline result (`rtsearch search --ms1`'s features), on ZeroMQ and in the metrics; MS2 answers all there."""

from __future__ import annotations

import asyncio
import json
import math
import threading

import numpy as np
import pytest
import zmq

from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.serve.outputs.elution import ElutionOutput
from rtsearch.signal.features import detect_features
from rtsearch.signal.precursors import precursor_elution
from rtsearch_sim.replay import load_run
from tests.devruns import DEV_RUNS
from tests.streaming import replay_through, running, scrape, serve_config

pytestmark = pytest.mark.asyncio
BSA1 = DEV_RUNS[0]


class Events:
    """A SUB on the results socket's ``elution`` topic, collecting in a thread."""

    def __init__(self, endpoint: str) -> None:
        self.items: list[dict] = []
        self._stop = threading.Event()
        self._sock = zmq.Context.instance().socket(zmq.SUB)
        self._sock.setsockopt(zmq.SUBSCRIBE, b"elution")
        self._sock.connect(endpoint)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._sock.poll(100):
                topic, body = self._sock.recv_multipart()
                self.items.append({"topic": topic, **json.loads(body)})

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close(0)


async def test_bsa1_replayed_publishes_elution_events(data, dev_indexes, tmp_path):
    spectra = sorted(load_run(data / BSA1.run), key=lambda s: (s.rt, s.ms_level))  # as acquired
    target = DatabaseTarget.open(dev_indexes[BSA1.fastas], BSA1.search_config(), get_backend("numpy"))
    cfg = serve_config(tmp_path, elution=True, intakes=1)
    async with running(target, cfg) as daemon:
        events = Events(daemon.endpoints.results)
        await asyncio.sleep(0.3)  # the subscription reaches the publisher
        sent, col = await replay_through(daemon, [("bsa1", spectra)], rate=400.0)
        (elution,) = [out for out in daemon.outputs if isinstance(out, ElutionOutput)]
        for _ in range(600):  # at 400/s (~130 MS1 scans/s) a NumPy tracker on 2 cores runs behind: let it finish
            if elution.idle():
                break
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # its last events reach the subscriber
        metrics = scrape(daemon.endpoints.metrics_port)
    events.stop()  # the run's end (at shutdown at the latest) ends what is past its apex
    assert col.report(sent.ms2).lost == 0
    identified = {r["scan"]: r for r in col.results() if r.get("peptide") and r.get("charge")}  # matched: followed
    assert len(identified) >= 500
    apex = {e["scan"]: e for e in events.items if e["event"] == "apex"}
    ends = [e for e in events.items if e["event"] == "end"]
    assert all(e["topic"] == b"elution" and e["v"] == 1 and e["run"] == "bsa1" for e in events.items)
    assert set(apex) <= set(identified) and ends and all(e["area"] > 0 for e in ends)
    # one precursor (m/z, charge) is followed once: the identified ones that started a follow are its first scans
    firsts: dict[tuple[float, int], int] = {}
    for scan in sorted(identified):
        r = identified[scan]
        key = next((k for k in firsts if k[1] == r["charge"] and abs(k[0] - r["precursor_mz"]) <= 1e-5 * k[0]), None)
        if key is None:
            firsts[(r["precursor_mz"], r["charge"])] = scan
    # followed from the MS2's own time however late its answer came (the tracker keeps the run's MS1 scans for that):
    # an apex for 98 % of them in the offline replay (tests/unit/test_signal_live.py), and 429 of 440 on a quiet or busy
    # machine; before, a follow started no more than 300 s of retention time before the newest scan, ~80 MS1 scans
    # at 400 /s, and a busy machine's answers, later than that, were followed from after their elution
    # (which scan of a precursor starts its follow is the order its answers came in: by the precursor's m/z and charge)
    ms1 = [s for s in spectra if s.ms_level == 1]
    top = max(float(s.mz.max()) for s in ms1 if s.n_peaks)  # BSA1's MS1 stops at m/z 800 (filtered upstream)
    firsts = {k: v for k, v in firsts.items() if k[0] < top}
    followed = [k for k in firsts if any(e["charge"] == k[1] and abs(e["precursor_mz"] - k[0]) <= 1e-5 * k[0]
                                         for e in apex.values())]  # fmt: skip
    print(f"precursors identified {len(firsts)}, with an apex event {len(followed)}")
    assert len(followed) >= 0.9 * len(firsts)
    # their apexes against the offline features
    scans = np.array(sorted(apex))
    by_scan = {s.scan: s for s in spectra}
    cols = detect_features(ms1).cols
    off, _ = precursor_elution(cols, np.array([by_scan[s].precursor_mz for s in scans]),
                               np.array([identified[s]["charge"] for s in scans]),
                               np.array([by_scan[s].rt for s in scans]))  # fmt: skip
    ms1_rt = np.array([s.rt for s in ms1])
    index = lambda rt: int(np.argmin(np.abs(ms1_rt - rt)))  # noqa: E731
    compared = [(apex[s]["apex_rt"], o) for s, o in zip(scans.tolist(), off.tolist(), strict=True) if math.isfinite(o)]
    near = sum(abs(index(a) - index(o)) <= 1 for a, o in compared)
    # 530 of 634 (84 %) on the 2-core development machine, 542 of 635 beside two CPU-bound processes (2026-12-07)
    print(f"elution apexes within one MS1 scan of the offline features: {near} of {len(compared)}")
    assert compared and near >= 0.7 * len(compared)
    assert 0 < metrics['rtsearch_elution_events_total{event="apex"}'] <= len(apex)  # scraped while still running
    # every identified precursor has an event: its own follow's, or that of an earlier scan of its m/z and charge
    live = [r for r in col.results() if r["status"] == "identified" and r["precursor_mz"] < top]
    seen, _ = precursor_elution(cols, np.array([r["precursor_mz"] for r in live]),
                                np.array([r["charge"] for r in live]), np.array([by_scan[r["scan"]].rt for r in live]))
    live = [r for r, a in zip(live, seen.tolist(), strict=True) if math.isfinite(a)]  # not cut off by the run's end
    covered = [r for r in live if any(e["charge"] == r["charge"] and abs(e["precursor_mz"] - r["precursor_mz"])
                                      <= 1e-5 * r["precursor_mz"] for e in apex.values())]  # fmt: skip
    # 32 of 32 and 36 of 36 (quiet, busy; 20 of 26 on the busy machine before late answers were followed in full)
    assert len(covered) >= 0.9 * len(live), [(r["scan"], r["precursor_mz"], r["charge"]) for r in live
                                             if r not in covered]  # fmt: skip
    print(f"followed {len(firsts)} precursors, apex events {len(apex)}, compared with offline {len(compared)}, "
          f"within one MS1 scan {near}, ends {len(ends)}; identified {len(live)}, with an event {len(covered)}")
    # the precursors the offline search identifies at 5 % FDR (its --ms1 apex: none where the run cut the elution
    # off): an apex event from the daemon, of the follow of their m/z and charge, within one MS1 scan of it
    offline = _offline_identified(data, dev_indexes, tmp_path)
    hits, near_off = 0, 0
    for scan, (mz, z, apex_rt) in offline.items():
        follow = max((e["scan"] for e in apex.values() if e["charge"] == z and e["scan"] <= scan
                      and abs(e["precursor_mz"] - mz) <= 1e-5 * mz), default=None)  # fmt: skip
        if follow is not None:
            hits += 1
            near_off += abs(index(apex[follow]["apex_rt"]) - index(apex_rt)) <= 1
    print(f"offline-identified with an MS1 apex {len(offline)}: an apex event {hits}, within one MS1 scan {near_off}")
    # an event for 59 of 59, 54 within one MS1 scan, quiet and beside two CPU-bound processes, 52 beside six
    # (2026-12-07; 45 beside six and 43 in a CI run before a late answer's follow was judged at once on the scans
    # already seen and a later MS2 of a follow ended since followed anew; 26 before late answers were followed in full)
    assert len(offline) >= 40 and hits >= 0.9 * len(offline) and near_off >= 0.8 * len(offline)


def _offline_identified(data, dev_indexes, tmp_path) -> dict[int, tuple[float, int, float]]:
    """BSA1's target PSMs at q ≤ 0.05 with an MS1 apex (none at 0.01: BSA1 holds under 100 confident), by
    `rtsearch search --ms1`: scan → (m/z, charge, apex)."""
    import csv

    from rtsearch.cli import main

    cfg = tmp_path / "search.toml"
    cfg.write_text(f'[search]\nprecursor_tolerance = "{BSA1.precursor}"\nfragment_tolerance = "{BSA1.fragment}"\n')
    out = tmp_path / "offline.tsv"
    assert main(["search", str(data / BSA1.run), "--index", str(dev_indexes[BSA1.fastas]), "--config", str(cfg),
                 "--backend", "numpy", "--ms1", "-o", str(out)]) == 0  # fmt: skip
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return {int(r["scan"]): (float(r["precursor_mz"]), int(r["charge"]), float(r["ms1_apex_rt"])) for r in rows
            if r["q_value"] and float(r["q_value"]) <= 0.05 and r["is_decoy"] == "false"
            and r["ms1_apex_rt"] not in ("", "nan")}  # fmt: skip
