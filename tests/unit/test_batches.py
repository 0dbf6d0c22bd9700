"""Spectrum files as batches (`rtsearch.io.batches`): a plain MGF or mzML read by worker processes, part by
part, gives the spectra the serial reader gives, in order, and a corrupt or cut one the serial reader's error
after the same spectra. Real spectra: iPRG 2013's F13.mgf (1,406 entries) and the E. coli mzML (139), looped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rtsearch.io.batches as batches
import rtsearch.io.parts as parts
from rtsearch.errors import InputError
from rtsearch.io.spectra import read_spectra
from tests.conftest import data_dir

F13 = data_dir() / "iprg2013-f13" / "F13.mgf"


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of ~1 MB, up to 5 workers (one for every two of 10 CPUs), whatever the machine."""
    monkeypatch.setattr(batches, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(batches, "PART_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(batches.os, "cpu_count", lambda: 10)


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
    plan = parts.plan(path, 5, batches._map)
    assert plan is not None and len(plan.parts) == 5 and plan.before[1] > 0  # cut, entries counted before each cut
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


ECOLI = data_dir() / "ecoli-small" / "Ecoli_MS2_small.mzML"


def _looped_mzml(tmp_path: Path, times: int = 6) -> Path:
    """The E. coli run with its spectrum list repeated (the index after it kept: readers ignore it)."""
    text = ECOLI.read_bytes()
    a, b = text.index(b"<spectrum "), text.rindex(b"</spectrum>") + len(b"</spectrum>")
    path = tmp_path / "looped.mzML"
    path.write_bytes(text[:a] + text[a:b] * times + text[b:])
    return path


def test_an_mzml_read_in_parts_gives_the_serial_spectra(tmp_path, parallel) -> None:
    path = _looped_mzml(tmp_path)
    plan = parts.plan(path, 5, batches._map)
    assert plan is not None and len(plan.parts) == 5 and plan.head == ECOLI.read_bytes().index(b"<spectrum ")
    assert plan.before[1:] == sorted(plan.before[1:]) and 0 < plan.before[1] < 6 * 139
    got = list(batches.read_batches(path, batch_size=100))
    want, have = _serial(path), _columns(got)
    assert len(have["scan"]) == 6 * 139
    for key in want:
        if key in ("mz", "i"):
            assert np.array_equal(have[key][0], want[key][0]), key
        else:
            assert have[key] == want[key], key


@pytest.mark.parametrize("cut", ["inside", "after the list"])
def test_a_cut_or_corrupt_mzml_gives_the_serial_error(tmp_path, parallel, cut: str) -> None:
    path = _looped_mzml(tmp_path)
    data = path.read_bytes()
    if cut == "inside":  # a spectrum of the third part broken: that part fails, the file is read here
        at = data.index(b"<binary>", len(data) // 2)
        path.write_bytes(data[:at] + b"<binary><broken>" + data[at + len(b"<binary>"):])
    else:  # every spectrum whole but the file cut after them: no plan, read here
        path.write_bytes(data[: data.rindex(b"</spectrumList>") + 20])
        assert parts.plan(path, 5, batches._map) is None
    serial: list = []
    with pytest.raises(InputError) as want:
        serial.extend(read_spectra(path))
    given = 0
    with pytest.raises(InputError) as got:
        for b in batches.read_batches(path, batch_size=100):
            given += len(b)
    assert str(got.value) == str(want.value) and "corrupt mzML" in str(got.value)
    assert given == len(serial) > 0


def test_mzml_parts_apply_the_files_param_groups(tmp_path, parallel) -> None:
    """Each m/z array's data type given only through a referenceableParamGroup of the file's head: a part that
    missed the group would find no data type (a spectrum with a problem, no peaks)."""
    path = _looped_mzml(tmp_path)
    data = path.read_bytes()
    group = (b'<referenceableParamGroupList count="1"><referenceableParamGroup id="mz64">'
             b'<cvParam cvRef="MS" accession="MS:1000523" name="64-bit float" />'
             b"</referenceableParamGroup></referenceableParamGroupList>")  # fmt: skip
    data = data.replace(b'<cvParam cvRef="MS" accession="MS:1000523" name="64-bit float" />',
                        b'<referenceableParamGroupRef ref="mz64"/>')  # fmt: skip
    at = data.index(b"</cvList>") + len(b"</cvList>")
    data = data[:at] + group + data[at:]
    path.write_bytes(data)
    got = _columns(list(batches.read_batches(path, batch_size=100)))
    want = _serial(path)
    assert got["scan"] == want["scan"] and got["problem"] == want["problem"]
    assert np.array_equal(got["mz"][0], want["mz"][0]) and len(got["mz"][0]) > 6 * 139 * 10
    assert not any(got["problem"])


def test_the_reader_count_is_capped(tmp_path, parallel) -> None:
    path = _looped(tmp_path)  # ~5.5 MB: five parts of ≥ 1 MB, five workers on ten CPUs
    assert batches.workers_for([path]) == 5
    assert batches.workers_for([path], 4) == 4
    assert batches.workers_for([path], 0) == batches.workers_for([path], 3) == 0  # under MIN_WORKERS: one process
