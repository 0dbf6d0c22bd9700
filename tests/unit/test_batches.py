"""Spectrum files as batches (`rtsearch.io.batches`): a plain MGF read by worker processes, part by part, gives
the spectra the serial reader gives, in order, and a corrupt one the serial reader's error after the same
spectra. Real spectra: iPRG 2013's F13.mgf (1,406 entries), looped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rtsearch.io.batches as batches
from rtsearch.errors import InputError
from rtsearch.io.spectra import read_spectra
from tests.conftest import data_dir

F13 = data_dir() / "iprg2013-f13" / "F13.mgf"


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of ~1 MB, up to 5 workers, whatever the machine."""
    monkeypatch.setattr(batches, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(batches, "PART_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(batches.os, "cpu_count", lambda: 5)


def _looped(tmp_path: Path, *, header: str = "", drop_scans: bool = False) -> Path:
    text = F13.read_text()
    if drop_scans:  # scan numbers then come from the entry's number in the file
        text = text.replace("TITLE=scan=", "TITLE=spectrum ").replace("\nSCANS=", "\nX_SCANS=")
    path = tmp_path / "looped.mgf"
    path.write_text(header + text * 2)
    return path


def _columns(got: list) -> dict[str, list]:
    out: dict[str, list] = {k: [] for k in ("run", "scan", "precursor_mz", "rt", "charges", "problem", "mz", "i")}
    for b in got:
        out["run"] += b.run
        out["scan"] += b.scan.tolist()
        out["precursor_mz"] += b.precursor_mz.tolist()
        out["rt"] += b.rt.tolist()
        out["charges"] += b.charges
        out["problem"] += b.problem
        out["mz"].append(b.mz)
        out["i"].append(b.intensity)
    out["mz"], out["i"] = [np.concatenate(out["mz"])], [np.concatenate(out["i"])]
    return out


def _serial(path: Path) -> dict[str, list]:
    return _columns(list(batches._batched(read_spectra(path), 1024)))


@pytest.mark.parametrize(("header", "drop_scans"), [("", False), ("CHARGE=3+\nCOM=header\n", True)])
def test_parts_read_in_processes_give_the_serial_spectra(tmp_path, parallel, header: str, drop_scans: bool) -> None:
    path = _looped(tmp_path, header=header, drop_scans=drop_scans)
    parts, before, _ = batches._parts(path, 5)
    assert len(parts) == 5 and before[1] > 0  # the file was cut, entries counted before each cut
    got = list(batches.read_batches(path, batch_size=300))
    assert all(0 < len(b) <= 300 for b in got)
    want, have = _serial(path), _columns(got)
    assert len(have["scan"]) == 2 * 1406
    for key in want:
        if key in ("mz", "i"):
            assert np.array_equal(have[key][0], want[key][0]), key
        else:
            assert have[key] == want[key], key
    if drop_scans:
        assert have["scan"][:3] == [1, 2, 3] and have["scan"][-1] == 2 * 1406


def test_a_corrupt_part_gives_the_serial_error_after_the_same_spectra(tmp_path, parallel) -> None:
    path = _looped(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.9)])  # cut inside an entry of the last part
    serial: list = []
    with pytest.raises(InputError) as want:
        serial.extend(read_spectra(path))
    given = 0
    with pytest.raises(InputError) as got:
        for b in batches.read_batches(path, batch_size=256):
            given += len(b)
    assert str(got.value) == str(want.value) and "truncated" in str(got.value)
    assert given == len(serial) > 2000


def test_small_and_other_files_are_read_in_this_process(tmp_path) -> None:
    got = list(batches.read_batches(F13, batch_size=1000))  # under PARALLEL_MIN_BYTES
    assert [len(b) for b in got] == [1000, 406]
    with pytest.raises(InputError, match="cannot read"):
        list(batches.read_batches(tmp_path / "missing.mgf", batch_size=10))


@pytest.mark.parametrize("fork", [True, False])
def test_one_pool_reads_every_run_forked_or_spawned(tmp_path, parallel, monkeypatch, fork: bool) -> None:
    if not fork:  # a thread already running: workers are spawned, not forked
        monkeypatch.setattr(batches.threading, "active_count", lambda: 2)
    path = _looped(tmp_path)
    pool = batches.PartPool(batches.workers_for([F13, path]))
    try:
        assert pool.forked is (fork and batches.sys.platform == "linux")
        assert pool.executor._max_workers == 5  # noqa: SLF001 - the largest run's part count
        got = [list(batches.read_batches(p, batch_size=500, pool=pool)) for p in (path, path)]
    finally:
        pool.close()
    want = _serial(path)
    for run in got:
        have = _columns(run)
        assert have["scan"] == want["scan"] and np.array_equal(have["mz"][0], want["mz"][0])
