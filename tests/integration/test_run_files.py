"""Run files and run bounds under a real daemon: names that never collide or overwrite, no empty files, a
results folder checked at start, open runs capped and idle ones ended, the shutdown bound losing nothing.

Before issue 15: ``a/b``, ``a_b``, ``a b`` shared ``a_b.tsv``; a restarted daemon overwrote an earlier
run's file; a run.end of an unknown or finished run wrote an empty file; an unwritable folder was found
only at the first run.end; 20,000 run names opened 20,000 runs; the shutdown bound dropped the batch
being scored unanswered.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import time
from pathlib import Path

import pytest

from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.errors import InputError
from rtsearch.protocol.wire import encode_run_end, encode_run_start, encode_spectrum
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.serve.daemon import Daemon
from rtsearch.types import Spectrum
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, load_run
from tests.streaming import exchange, running, scrape, serve_config

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module")
def ms2(data) -> list[Spectrum]:
    return [s for s in load_run(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2]


@pytest.fixture()
def target(demo_index) -> DatabaseTarget:
    return DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))


def _runs(ms2: list[Spectrum], names: list[str], n: int, *, end: bool = True) -> list[list[bytes]]:
    frames = []
    for k, name in enumerate(names):
        frames.append(encode_run_start(name))
        frames += [encode_spectrum(dataclasses.replace(s, run=name)) for s in ms2[k * n : (k + 1) * n]]
        if end:
            frames.append(encode_run_end(name, n))
    return frames


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


async def _finished(daemon: Daemon, n: int, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while len(daemon.finished) < n and time.monotonic() < end:
        await asyncio.sleep(0.05)
    assert len(daemon.finished) >= n, [f.path for f in daemon.finished]


async def test_run_names_never_share_or_overwrite_a_file(target, ms2, tmp_path):
    names = ["a/b", "a_b", "a b", "a:b", "..", "x" * 300]
    async with running(target, serve_config(tmp_path)) as daemon:
        await asyncio.to_thread(exchange, daemon, _runs(ms2, names, 3), 3 * len(names))
        await _finished(daemon, len(names))
        # a run.end for a run that is finished, and for one never seen: nothing to write
        await asyncio.to_thread(exchange, daemon, [encode_run_end("a_b", 0), encode_run_end("never", 0)], 0)
        await asyncio.sleep(0.5)
    paths = [f.path for f in daemon.finished]
    assert len(set(paths)) == len(names) and all(len(_rows(p)) == 3 for p in paths)
    assert {r["run"] for p in paths for r in _rows(p)} == set(names)
    assert all(len(p.name.encode()) < 255 and p.parent == tmp_path / "results" for p in paths)
    assert sorted(p.name for p in (tmp_path / "results").glob("*.tsv")) == sorted(p.name for p in paths)
    # a second daemon on the same folder reuses a run name: a new file, the first one untouched
    first = next(p for p in paths if p.name == "a_b.tsv")
    async with running(target, serve_config(tmp_path)) as again:
        await asyncio.to_thread(exchange, again, _runs(ms2[30:], ["a_b"], 5), 5)
        await _finished(again, 1)
    (second,) = [f.path for f in again.finished]
    assert second != first and second.name == "a_b.part2.tsv"
    assert len(_rows(first)) == 3 and len(_rows(second)) == 5


async def test_an_unwritable_results_folder_is_refused_at_start(target, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    daemon = Daemon(target, serve_config(tmp_path, results_dir=str(tmp_path / "file" / "results")))
    with pytest.raises(InputError, match="results folder .* is not writable"):
        await asyncio.wait_for(daemon.run(asyncio.Event()), 60)
    assert not daemon.ready.is_set()


async def test_open_runs_are_capped_and_idle_ones_ended(target, ms2, tmp_path, caplog):
    async with running(target, serve_config(tmp_path, max_open_runs=3, run_idle_s=1.0)) as daemon:
        names = [f"r{k}" for k in range(8)]
        await asyncio.to_thread(exchange, daemon, _runs(ms2, names, 2, end=False), 16)
        open_now = daemon.metrics.registry.get_sample_value("rtsearch_runs_open")
        assert open_now is not None and open_now <= 3 + 5  # three open; the ended ones only while answered
        # five made room for later ones, the oldest first (which finishes first depends on the batches' order)
        made_room = [r.args[1] for r in caplog.records if "(max_open_runs): ending run" in r.getMessage()]
        assert made_room == names[:5]
        await _finished(daemon, 8, 30)  # the last three: idle for a second
        assert daemon.metrics.registry.get_sample_value("rtsearch_runs_open") == 0
    assert sorted(f.summary.spectra for f in daemon.finished) == [2] * 8


async def test_the_shutdown_bound_answers_what_it_cannot_score(target, ms2, tmp_path, monkeypatch):
    score = target.score

    def slow(spectra):
        time.sleep(0.3)
        return score(spectra)

    monkeypatch.setattr(target, "score", slow)
    stop = asyncio.Event()
    daemon = Daemon(target, serve_config(tmp_path, max_batch=4, shutdown_timeout_s=0.5))
    task = asyncio.create_task(daemon.run(stop))
    await asyncio.wait_for(daemon.ready.wait(), 60)
    col = await asyncio.to_thread(Collector(daemon.endpoints.results).start)
    frames = _runs(ms2, ["bounded"], 40, end=False)

    def send() -> None:
        with Sender(daemon.endpoints.spectra, mode="push") as s:
            for f in frames:
                s.send(f)

    await asyncio.to_thread(send)
    await asyncio.sleep(0.5)  # some batches scored, most waiting, one being scored
    stop.set()
    await asyncio.wait_for(task, 60)
    await asyncio.to_thread(col.wait, 40, idle_s=5, timeout_s=30)
    col.stop()
    results = col.results()
    assert sorted(r["scan"] for r in results) == sorted(s.scan for s in ms2[:40])  # all, once
    shed = [r for r in results if r["status"] == "shed"]
    assert shed and all("shutting down" in r["reason"] for r in shed)
    (done,) = daemon.finished
    assert len(_rows(done.path)) == 40


async def test_a_results_file_that_cannot_be_written_is_counted_and_written_once_it_can(target, ms2, tmp_path,
                                                                                     monkeypatch):  # fmt: skip
    from rtsearch.serve.runs import finish

    monkeypatch.setattr(finish, "WRITE_RETRY_S", 0.2)
    results, aside = tmp_path / "results", tmp_path / "aside"
    async with running(target, serve_config(tmp_path)) as daemon:
        await asyncio.to_thread(exchange, daemon, _runs(ms2, ["r"], 20, end=False), 20)
        # mid-run the folder goes (a file in its place: unwritable even for root); then the run ends
        results.rename(aside)
        results.write_text("not a folder")
        await asyncio.to_thread(exchange, daemon, [encode_run_end("r", 20)], 0)
        deadline = time.monotonic() + 30
        while scrape(daemon.endpoints.metrics_port).get("rtsearch_results_write_failures_total", 0) < 2:
            assert time.monotonic() < deadline, "no write failure counted"
            await asyncio.sleep(0.1)
        assert not daemon.finished and list((aside / ".journal").glob("*.rtj"))  # the run kept, not lost
        results.unlink()
        aside.rename(results)  # writable again: the next try writes it
        await _finished(daemon, 1, timeout=30)
    (done,) = daemon.finished
    assert done.path == results / "r.tsv" and len(_rows(done.path)) == 20
    assert not list((results / ".journal").glob("*.rtj"))  # the journal went once the file was written


async def test_each_run_file_says_what_produced_it(target, ms2, tmp_path):
    import json

    import pyarrow.parquet as pq

    rec = {"rtsearch": "test", "config": {"serve": {"results_format": "parquet"}}}
    async with running(target, serve_config(tmp_path, results_format="parquet")) as daemon:
        daemon.ends.provenance = rec
        await asyncio.to_thread(exchange, daemon, _runs(ms2, ["p"], 5), 5)
        await _finished(daemon, 1)
    (done,) = daemon.finished
    assert json.loads(done.path.with_name(done.path.name + ".provenance.json").read_text()) == rec
    assert json.loads(pq.read_schema(done.path).metadata[b"rtsearch.provenance"]) == rec


async def test_run_files_name_spectra_by_the_ids_they_were_sent_with(target, ms2, tmp_path):
    from rtsearch.protocol.batch import encode_spectra

    block = [dataclasses.replace(s, run="block") for s in ms2[20:40]]
    frames = [*_runs(ms2, ["each"], 20), encode_run_start("block"),
              encode_spectra("block", block, sent_ns=time.time_ns()), encode_run_end("block", 20)]  # fmt: skip
    async with running(target, serve_config(tmp_path)) as daemon:
        await asyncio.to_thread(exchange, daemon, frames, 40)
        await _finished(daemon, 2)
    files = {f.path.stem: _rows(f.path) for f in daemon.finished}
    assert ms2[0].native_id.startswith("controllerType=0 controllerNumber=1 scan=")
    for name, sent in (("each", ms2[:20]), ("block", ms2[20:40])):
        assert {(int(r["scan"]), r["spectrum_id"]) for r in files[name]} == {(s.scan, s.native_id) for s in sent}
