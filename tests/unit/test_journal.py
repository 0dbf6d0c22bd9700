"""Run journals: batches written as they are published come back whole, a cut-short record is not read,
and a run is finished from its journal exactly as from its table in memory."""

from __future__ import annotations

import csv
import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.io.results import claim_results_path, write_run_results
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import LiveRun
from rtsearch.serve.runs.journal import FOLDER, Journals, leftover_runs, read_journal
from rtsearch.serve.runs.refits import FinishOutcome, RunToFinish, finish_runs
from rtsearch.types import ResultStatus


@pytest.fixture(scope="module")
def target(demo_index) -> DatabaseTarget:
    return DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))


def recover(folder: Path, target: DatabaseTarget) -> list[FinishOutcome]:
    """What a daemon starting on ``folder`` does with the journals it finds there
    (`rtsearch.serve.runs.finish.RunEnds`):
    each of ``target``'s finished into its results file."""
    claimed: set[Path] = set()
    return finish_runs(target, [RunToFinish(run, claim_results_path(folder, run, "tsv", claimed), journal=path)
                                for run, path in leftover_runs(folder, target)])  # fmt: skip


def _journaled_run(target, folder, spectra) -> tuple[LiveRun, Journals]:
    journals = Journals(folder, target)
    journal = journals.open("j/run")
    live = LiveRun("j/run", target, sink=functools.partial(journals.append, journal))
    for s in range(0, 100, 25):
        live.add_scored(target.score(SpectraBatch.of(spectra[s : s + 25])))
    live.add_unscored(ResultStatus.SHED, [1, 2], [500.0, 600.0], ["overload", "overload"])
    return live, journals


def test_a_journal_gives_back_what_was_written_and_finishes_the_run_the_same(target, tmp_path):
    spectra = [dataclasses.replace(s, run="j/run") for s in read_spectra(bundled(RUN))]
    live, journals = _journaled_run(target, tmp_path, spectra)
    journals.shutdown()
    (path,) = (tmp_path / FOLDER).glob("*.rtj")
    head, batches, statuses, cut = read_journal(path)
    assert head["run"] == "j/run" and head["kind"] == "index" and cut == 0
    assert [len(b) for b in batches] == [25, 25, 25, 25, 2]
    assert sum(s == "shed" for st in statuses for s in st) == 2
    for mine, back in zip(live.table.batches, batches, strict=True):
        np.testing.assert_array_equal(mine.scan, back.scan)
        np.testing.assert_array_equal(mine.best.match, back.best.match)
        np.testing.assert_array_equal(mine.best.features, back.best.features)
        assert mine.reason == back.reason
    # finishing from the journal writes what finishing from memory writes
    table, summary = live.finish()
    expected = write_run_results(table, tmp_path / "memory.tsv")
    (done,) = recover(tmp_path, target)
    assert done.summary == summary and done.path.name.startswith("j_run-")
    assert done.path.read_text() == expected.read_text()
    assert not list((tmp_path / FOLDER).glob("*.rtj"))  # finished: the journal is gone


def test_a_cut_short_record_is_left_out_and_counted(target, tmp_path):
    spectra = [dataclasses.replace(s, run="j/run") for s in read_spectra(bundled(RUN))]
    _, journals = _journaled_run(target, tmp_path, spectra)
    journals.shutdown()
    (path,) = (tmp_path / FOLDER).glob("*.rtj")
    data = path.read_bytes()
    path.write_bytes(data[:-10])  # the last write did not finish
    _, batches, _, cut = read_journal(path)
    assert [len(b) for b in batches] == [25, 25, 25, 25] and cut > 0
    (done,) = recover(tmp_path, target)
    with open(done.path, newline="") as fh:
        assert len(list(csv.DictReader(fh, delimiter="\t"))) == 100
    assert done.cut == cut


def test_a_journal_of_another_target_is_left_alone(target, tmp_path, demo_index):
    spectra = [dataclasses.replace(s, run="j/run") for s in read_spectra(bundled(RUN))]
    _, journals = _journaled_run(target, tmp_path, spectra)
    journals.shutdown()
    other = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    other.features = other.features[:-1]  # another kind of features: its matches would be named wrongly
    assert recover(tmp_path, other) == []
    assert len(list((tmp_path / FOLDER).glob("*.rtj"))) == 1 and not list(tmp_path.glob("*.tsv"))


def test_lower_ranks_come_back_from_a_journal(demo_index, tmp_path):
    ranked = DatabaseTarget(demo_index, dataclasses.replace(load_config(bundled(TOML)).search, ranks=3),
                            get_backend("numpy"))  # fmt: skip
    spectra = [dataclasses.replace(s, run="j/run") for s in read_spectra(bundled(RUN))]
    live, journals = _journaled_run(ranked, tmp_path, spectra)
    journals.shutdown()
    (path,) = (tmp_path / FOLDER).glob("*.rtj")
    _, batches, _, _ = read_journal(path)
    assert [len(b.lower) for b in batches] == [2, 2, 2, 2, 0]  # the shed spectra have no match at all
    for mine, back in zip(live.table.batches, batches, strict=True):
        for a, b in zip(mine.lower, back.lower, strict=True):
            for f in dataclasses.fields(a):
                np.testing.assert_array_equal(getattr(a, f.name), getattr(b, f.name))
    table, _ = live.finish()
    expected = write_run_results(table, tmp_path / "memory.tsv")
    with open(expected, newline="") as fh:
        ranks = [int(r["rank"]) for r in csv.DictReader(fh, delimiter="\t")]
    assert ranks.count(3) > 50 and ranks.count(1) == 102
    (done,) = recover(tmp_path, ranked)
    assert done.path.read_text() == expected.read_text()


def test_batches_without_a_match_are_written_without_their_matches(target, tmp_path):
    """Shed and invalid spectra (and a batch the engine failed on) have no match: 25 bytes a row in the journal
    instead of 265, read back as the same batch; a scored batch is written whole."""
    journals = Journals(tmp_path, target)
    journal = journals.open("shed/run")
    live = LiveRun("shed/run", target, sink=functools.partial(journals.append, journal))
    scans = np.arange(1000)
    live.book_unscored(ResultStatus.SHED, scans, np.full(1000, 500.25), ["overload"] * 1000, [f"s{i}" for i in scans])
    live.add_unscored(ResultStatus.UNIDENTIFIED, [5000], [321.5], ["engine error: boom"])
    size = journal.path.stat().st_size
    spectra = [dataclasses.replace(s, run="shed/run") for s in read_spectra(bundled(RUN))][:20]
    live.add_scored(target.score(SpectraBatch.of(spectra)))
    journals.shutdown()
    (path,) = (tmp_path / FOLDER).glob("*.rtj")
    assert size < 1000 * 40 + 16_000  # ids, reasons and the header aside: ~25 bytes a row
    head, batches, statuses, cut = read_journal(path)
    assert [len(b) for b in batches] == [1000, 1, 20] and cut == 0
    assert statuses[0] == ["shed"] * 1000 and statuses[1] == ["unidentified"]
    for mine, back in zip(live.table.batches, batches, strict=True):
        for name in ("match", "charge", "calc_mz", "ppm_error", "matched_peaks", "features"):
            np.testing.assert_array_equal(getattr(mine.best, name), getattr(back.best, name))
        np.testing.assert_array_equal(mine.scan, back.scan)
        np.testing.assert_array_equal(mine.precursor_mz, back.precursor_mz)
        assert mine.reason == back.reason and mine.native_id == back.native_id
    assert (batches[2].best.match >= 0).any()  # the scored batch, whole
