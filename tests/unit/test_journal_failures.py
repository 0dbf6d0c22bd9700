"""Journals when the results folder fails them (issue 67, S6, S7, S9): a write that fails is cut back, kept and
written once the folder takes it; a folder that cannot be written stops no run; few files are open at once.

Faults are injected where the journal calls the operating system (`tests.disk_faults`): the errors a folder made
immutable (``chattr +i``: EPERM) or a full disk (ENOSPC, a write cut short) give.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import LiveRun
from rtsearch.serve.observe.stats import JournalWrite
from rtsearch.serve.runs.journal import FOLDER, Journals, read_journal
from rtsearch.types import ResultStatus
from tests.disk_faults import Disk


@pytest.fixture(scope="module")
def target(demo_index) -> DatabaseTarget:
    return DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))


@pytest.fixture(scope="module")
def spectra():
    return [dataclasses.replace(s, run="full") for s in read_spectra(bundled(RUN)) if s.ms_level == 2]


def _run(target, journals: Journals, name: str) -> LiveRun:
    journal = journals.open(name)
    return LiveRun(name, target, sink=functools.partial(journals.append, journal))


def test_a_full_disk_cuts_the_write_back_and_writes_it_once_there_is_room(target, spectra, tmp_path, monkeypatch):
    disk = Disk(monkeypatch)
    seen: list[JournalWrite] = []
    journals = Journals(tmp_path, target, record=seen.append)
    try:
        live = _run(target, journals, "full")
        live.add_scored(target.score(SpectraBatch.of(spectra[:20])))
        disk.full = True
        for s in range(20, 60, 10):  # answered while the disk is full: no error reaches the caller
            live.add_scored(target.score(SpectraBatch.of(spectra[s : s + 10])))
        live.add_unscored(ResultStatus.SHED, [90_001], [500.0], ["overload"])
        (path,) = (tmp_path / FOLDER).glob("*.rtj")
        _, batches, _, cut = read_journal(path)
        assert [len(b) for b in batches] == [20] and cut == 0  # the cut-short write taken back: whole records only
        assert sum(s.failed for s in seen) >= 1 and seen[-1].owed_bytes and seen[-1].owed_bytes > 0
        disk.full = False
        journals.sync()  # (the flusher's pass; `RETRY_S` is over by the time it looks, or the next append writes)
        live.add_unscored(ResultStatus.SHED, [90_002], [501.0], ["overload"])
        journals.shutdown()
        _, batches, statuses, cut = read_journal(path)
        assert [len(b) for b in batches] == [20, 10, 10, 10, 10, 1, 1] and cut == 0
        assert [s for st in statuses for s in st][-2:] == ["shed", "shed"]
        for mine, back in zip(live.table.batches, batches, strict=True):
            np.testing.assert_array_equal(mine.scan, back.scan)
            np.testing.assert_array_equal(mine.best.match, back.best.match)
        assert seen[-1].owed_bytes == 0
    finally:
        journals.shutdown()


def test_a_folder_that_cannot_be_written_stops_no_run_and_loses_nothing_once_it_can(target, spectra, tmp_path,
                                                                                    monkeypatch):  # fmt: skip
    disk = Disk(monkeypatch)
    disk.frozen = True
    journals = Journals(tmp_path, target)
    try:
        runs = [_run(target, journals, f"frozen-{k}") for k in range(3)]  # new runs while the folder is frozen
        for k, live in enumerate(runs):
            live.add_scored(target.score(SpectraBatch.of(spectra[10 * k : 10 * k + 10])))
            live.add_unscored(ResultStatus.INVALID, [80_000 + k], [float("nan")], ["bad peaks"])
        assert not (tmp_path / FOLDER).exists() or not list((tmp_path / FOLDER).glob("*.rtj"))
        disk.frozen = False
        journals.sync()
        journals.shutdown()
        paths = sorted((tmp_path / FOLDER).glob("*.rtj"))
        assert len(paths) == 3
        back = {read_journal(p)[0]["run"]: read_journal(p)[1] for p in paths}
        for k, live in enumerate(runs):
            assert [len(b) for b in back[f"frozen-{k}"]] == [10, 1]
            np.testing.assert_array_equal(back[f"frozen-{k}"][0].scan, live.table.batches[0].scan)
    finally:
        journals.shutdown()


def test_at_most_max_open_journal_files_are_open(target, spectra, tmp_path):
    """20,000 runs open used to hold 20,000 files (EMFILE at 1,096 under systemd's default limit): now
    `MAX_OPEN` at most; a run whose file was closed is opened again to append."""
    fds = lambda: len(os.listdir("/proc/self/fd"))  # noqa: E731
    before = fds()
    journals = Journals(tmp_path, target, max_open=8)
    try:
        runs = [_run(target, journals, f"many-{k}") for k in range(40)]
        batch = target.score(SpectraBatch.of(spectra[:3]))
        for _ in range(2):  # every run written to twice, round the 40: each file opened again
            for live in runs:
                live.add_scored(batch)
            assert fds() <= before + 8 + 1  # (+ the flusher's descriptor while it fsyncs)
        journals.shutdown()
        paths = list((tmp_path / FOLDER).glob("*.rtj"))
        assert len(paths) == 40 and all([len(b) for b in read_journal(p)[1]] == [3, 3] for p in paths)
    finally:
        journals.shutdown()
