"""Header values every later stage accepts (issue 67, S2 and S3), through a real daemon.

S2: one spectrum with ``rt = 1e308`` (finite, so once accepted) made the run's ``run.end`` fail while finishing
the run (the run's retention-time fit overflowed to NaN features, then an IndexError in the q-values of the
discriminant's fit): no results file, and every restart failed while recovering its journal. S3: a spectrum whose
``charges`` list held 10,000 entries stalled the engine for seconds. Both are now refused at the wire: answered
``invalid`` with a reason naming the field and its bound, and the run around them ends normally. Both tests failed
on the code before issue 67 (S2: no results file, the run's end raised; S3: the spectrum was scored, not refused).
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import json
import time

import pytest

from rtsearch.protocol.batch import encode_spectra
from rtsearch.protocol.wire import encode_run_end, encode_run_start, encode_spectrum
from rtsearch.serve.daemon import Daemon
from rtsearch.types import Spectrum
from tests.streaming import exchange, running, serve_config

pytestmark = pytest.mark.asyncio


@pytest.fixture()
def ms2(ecoli_run) -> list[Spectrum]:
    return [s for s in ecoli_run if s.ms_level == 2]


async def _finished(daemon: Daemon, n: int, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while len(daemon.finished) < n and time.monotonic() < end:
        await asyncio.sleep(0.05)
    assert len(daemon.finished) >= n, "the run did not finish (no results file)"


def _with(frames: list[bytes], **changes: object) -> list[bytes]:
    h = json.loads(frames[1])
    h.update(changes)
    return [frames[0], json.dumps(h).encode(), *frames[2:]]


async def test_an_absurd_retention_time_is_refused_and_the_run_still_ends(engine, ms2, tmp_path):
    """S2: the whole run (so that its end fits a discriminant and retention times), one spectrum at rt 1e308 on
    the spectrum topic and one on the batched topic."""
    run = "s2"
    spectra = [dataclasses.replace(s, run=run) for s in ms2]
    bad, bad_row = spectra[7], spectra[8]
    frames = [encode_run_start(run)]
    for s in spectra:
        if s is bad:
            frames.append(_with(encode_spectrum(s), rt=1e308))
        elif s is bad_row:
            frames.append(encode_spectra(run, [dataclasses.replace(s, rt=1e308)], sent_ns=time.time_ns()))
        else:
            frames.append(encode_spectrum(s))
    frames.append(encode_run_end(run, len(spectra)))
    async with running(engine, serve_config(tmp_path)) as daemon:
        results = (await asyncio.to_thread(exchange, daemon, frames, len(spectra))).results()
        await _finished(daemon, 1)
        path = daemon.finished[0].path
        ready = daemon.metrics.registry.get_sample_value("rtsearch_ready")
    by_scan = {int(r["scan"]): r for r in results}  # type: ignore[call-overload]
    assert len(results) == len(spectra) == len(by_scan)
    assert [by_scan[s.scan]["status"] for s in (bad, bad_row)] == ["invalid", "invalid"]
    assert "'rt' must be at most 10,000,000" in str(by_scan[bad.scan]["reason"])
    assert "'rt' must be a finite number within ±10,000,000" in str(by_scan[bad_row.scan]["reason"])
    assert sum(r["status"] == "invalid" for r in results) == 2
    assert ready == 1
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert {int(r["scan"]) for r in rows} == {s.scan for s in spectra}  # the run's results file, every spectrum
    assert sum(r.get("status") == "identified" or float(r.get("q_value") or 1) <= 0.05 for r in rows) > 10


async def test_unbounded_lists_headers_and_control_characters_are_refused_with_the_reason(engine, ms2, tmp_path):
    """S3: a header listing 10,000 charges is answered ``invalid`` at once (it stalled the engine 7.9 s), and so
    are a header over 64 kB and an id holding ESC; a run name holding NUL names no run: counted. The spectrum
    sent after them is scored."""
    run = "s3"
    first, big, esc, nul, last = (dataclasses.replace(s, run=run) for s in ms2[:5])
    frames = [encode_run_start(run), _with(encode_spectrum(first), charges=[1 + k % 10 for k in range(10_000)]),
              _with(encode_spectrum(big), note="x" * 70_000), _with(encode_spectrum(esc), id="scan=1\x1b[2J"),
              encode_spectrum(dataclasses.replace(nul, run="s3\x00evil")), encode_spectrum(last),
              encode_run_end(run, 4)]  # fmt: skip
    async with running(engine, serve_config(tmp_path)) as daemon:
        results = (await asyncio.to_thread(exchange, daemon, frames, 4)).results()
        await _finished(daemon, 1)
        metric = daemon.metrics.registry.get_sample_value
        ready, counted = metric("rtsearch_ready"), {c: metric("rtsearch_invalid_total", {"reason": c}) for c in
                                                    ("field", "header")}  # fmt: skip
        names = [f.path.name for f in daemon.finished]
    by_scan = {int(r["scan"]): r for r in results}  # type: ignore[call-overload]
    assert set(by_scan) == {first.scan, big.scan, esc.scan, last.scan}
    reasons = {scan: str(by_scan[scan]["reason"]) for scan in (first.scan, big.scan, esc.scan)}
    assert all(by_scan[scan]["status"] == "invalid" for scan in reasons)
    assert "'charges' must be a list of at most 8 distinct integers 1..10, got 10,000 values" in reasons[first.scan]
    assert "more than 65,536" in reasons[big.scan] and "U+001B" in reasons[esc.scan]
    assert by_scan[last.scan]["status"] != "invalid"
    assert counted == {"field": 3.0, "header": 1.0}  # the NUL run's spectrum among them, unanswered
    assert ready == 1 and names == ["s3.tsv"]
