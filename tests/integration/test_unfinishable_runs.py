"""A run that cannot be finished keeps no daemon from serving or from starting again (issue 67, S2).

An adversarial client sent one spectrum with ``rt = 1e308`` and its ``run.end``: finishing the run failed, and every
restart exited 1 while recovering its journal — one message blocked the results folder for good. The wire now
refuses such values (tests/integration/test_header_bounds.py); what is checked here is what happens when a run still
cannot be finished (a journal damaged on disk, a bug): what can be written is, the journal is moved aside with the
reason, it is counted, and serving goes on.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, bundled
from rtsearch.io.spectra import read_spectra
from rtsearch.matches import STATUSES
from rtsearch.protocol.wire import encode_run_end, encode_spectrum
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.table import PsmTable
from rtsearch.serve.runs.journal import FOLDER, SET_ASIDE, Journals
from rtsearch.serve.runs.refits import RunToFinish, finish_runs
from rtsearch.types import ResultStatus
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender
from tests.streaming import running, serve_config


@pytest.fixture(scope="module")
def ms2():
    return [s for s in read_spectra(bundled(RUN)) if s.ms_level == 2][:60]


def _journal(target: DatabaseTarget, folder: Path, run: str, spectra: list, *, damaged: bool) -> None:
    """``run``'s journal as a daemon killed before its run.end leaves it, three batches of 20; ``damaged``: the
    second batch's matches point past the target's entries (bytes changed on disk)."""
    journals = Journals(folder, target)
    journal = journals.open(run)
    identified = STATUSES.index(ResultStatus.IDENTIFIED.value)
    for k in range(0, 60, 20):
        batch = target.score(SpectraBatch.of([dataclasses.replace(s, run=run) for s in spectra[k : k + 20]]))
        if damaged and k == 20:
            batch.best.match[batch.best.match >= 0] += target.entries
        journals.append(journal, batch, np.full(len(batch), identified, np.uint8))
    journals.shutdown()


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_a_run_whose_fdr_fails_is_written_without_q_values(engine, ms2, tmp_path, monkeypatch):
    def fails(self: PsmTable) -> None:
        raise FloatingPointError("the discriminant did not converge")

    monkeypatch.setattr(PsmTable, "finalize", fails)
    batch = engine.score(SpectraBatch.of([dataclasses.replace(s, run="r") for s in ms2[:20]]))
    (done,) = finish_runs(engine, [RunToFinish("r", tmp_path / "r.tsv", batch=batch, by_status={"identified": 20})])
    assert done.error == "FloatingPointError: the discriminant did not converge" and not done.disk
    assert done.summary is None and done.path == tmp_path / "r.tsv"
    rows = _rows(done.path)
    assert sorted(int(r["scan"]) for r in rows) == sorted(s.scan for s in ms2[:20])  # every spectrum, as scored
    assert all(r["q_value"] in ("", "nan", "NaN") for r in rows)  # no q-value was made up


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_journal_that_cannot_be_finished_is_set_aside_and_serving_goes_on(engine, ms2, tmp_path):
    results = tmp_path / "results"
    _journal(engine, results, "damaged", ms2, damaged=True)
    _journal(engine, results, "whole", ms2, damaged=False)
    for attempt in range(2):  # the second start finds nothing left to trip on
        async with running(engine, serve_config(tmp_path)) as daemon:
            metric = daemon.metrics.registry.get_sample_value
            col = Collector(daemon.endpoints.results).start()
            run = f"after-{attempt}"
            with Sender(daemon.endpoints.spectra, mode="push", wait_s=20) as sender:
                for s in ms2[:10]:
                    sender.send(encode_spectrum(dataclasses.replace(s, run=run)))
                sender.send(encode_run_end(run, 10))
            await asyncio.to_thread(col.wait, 10, idle_s=30, timeout_s=300)
            col.stop()
            for _ in range(600):
                if len(daemon.finished) == (2 if attempt == 0 else 1):
                    break
                await asyncio.sleep(0.1)
            assert metric("rtsearch_ready") == 1
            assert metric("rtsearch_run_finish_failures_total") == (1 if attempt == 0 else 0)
        assert sorted(r["scan"] for r in col.results()) == sorted(s.scan for s in ms2[:10])
    assert not list((results / FOLDER).glob("*.rtj"))
    aside = results / FOLDER / SET_ASIDE
    (journal,) = aside.glob("damaged-*.rtj")
    reason = (aside / f"{journal.name}.reason.txt").read_text()
    assert reason.startswith("IndexError"), reason
    assert not list(results.glob("damaged*.tsv"))  # nothing of it could be written: its journal is what is left
    (whole,) = results.glob("whole*.tsv")
    assert sorted(int(r["scan"]) for r in _rows(whole)) == sorted(s.scan for s in ms2)
    assert len(list(results.glob("after-*.tsv"))) == 2
