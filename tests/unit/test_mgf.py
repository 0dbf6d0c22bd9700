"""The bulk MGF reader (`rtsearch.io.mgf`) against pyteomics' (what it replaced) on real files, across block
boundaries, gzipped, and on the forms that leave its fast path."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest
from pyteomics import mgf as pyteomics_mgf

import rtsearch.io.mgf as bulk
from rtsearch.errors import InputError
from rtsearch.io.spectra import count_spectra, read_spectra
from tests.conftest import data_dir

F13 = data_dir() / "iprg2013-f13" / "F13.mgf"


def _same_as_pyteomics(path: Path, got: list) -> None:
    want = list(pyteomics_mgf.read(str(path), convert_arrays=1, read_charges=False, use_header=True))
    assert len(got) == len(want) > 0
    for sp, ref in zip(got, want, strict=True):
        order = np.argsort(ref["m/z array"], kind="stable")
        np.testing.assert_array_equal(sp.mz, ref["m/z array"][order])
        np.testing.assert_array_equal(sp.intensity, ref["intensity array"][order].astype(np.float32))
        assert sp.precursor_mz == ref["params"]["pepmass"][0]
        assert sp.charges == tuple(int(z) for z in ref["params"]["charge"])
        assert sp.scan == int(ref["params"]["scans"]) and not sp.problem


def test_a_real_file_reads_as_pyteomics_reads_it_whatever_the_block_size(monkeypatch, tmp_path) -> None:
    whole = list(read_spectra(F13))
    _same_as_pyteomics(F13, whole)
    monkeypatch.setattr(bulk, "BLOCK_BYTES", 4096)  # ~1,400 entries over ~700 blocks, most cut mid-entry
    small = list(read_spectra(F13))
    assert [s.scan for s in small] == [s.scan for s in whole]
    assert all(np.array_equal(a.mz, b.mz) and np.array_equal(a.intensity, b.intensity)
               for a, b in zip(small, whole, strict=True))  # fmt: skip
    gz = tmp_path / "F13.mgf.gz"
    gz.write_bytes(gzip.compress(F13.read_bytes()))
    assert count_spectra(gz) == count_spectra(F13) == len(whole) == 1406
    zipped = list(read_spectra(gz))
    assert [(s.scan, s.n_peaks) for s in zipped] == [(s.scan, s.n_peaks) for s in whole]


def test_forms_off_the_fast_path_read_as_pyteomics_reads_them(tmp_path) -> None:
    entries = [e + "END IONS\n" for e in F13.read_text().split("END IONS\n")[:6]]
    peak = re.compile(r"(?m)^(\d\S*)\t(\S+)$")
    entries[1] = peak.sub(r"\1 \2 1", entries[1])  # a third column (fragment charge)
    entries[2] = entries[2].replace("\nEND IONS", "\n\nEND IONS")  # a blank line among the peaks
    lines = entries[3].split("\n")
    entries[3] = "\n".join(lines[:7] + ["RTINSECONDS=61.5"] + lines[7:])  # a parameter after the first peak
    entries[4] = peak.sub(r"  \1  \2", entries[4])  # peaks indented, two spaces between
    entries[5] = entries[5].replace("\n", "\r\n")
    path = tmp_path / "forms.mgf"
    path.write_text("COM=a header line\nCHARGE=3+\n" + "".join(entries).replace("CHARGE=2+\n", "", 1))
    got = list(read_spectra(path))
    _same_as_pyteomics(path, got)
    assert got[0].charges == (3,) and got[1].charges == (2,)  # the file's header, an entry's own
    assert got[3].rt == 61.5


def test_errors_name_the_entry_and_the_line_in_any_block(monkeypatch, tmp_path) -> None:
    lines = F13.read_text().splitlines()
    k = next(i for i in range(3000, 3100) if lines[i][:1].isdigit())
    lines[k] = "12.5x garbage"
    path = tmp_path / "garbled.mgf"
    path.write_text("\n".join(lines) + "\n")
    entry = "\n".join(lines[:k]).count("BEGIN IONS")
    for block in (bulk.BLOCK_BYTES, 8192):
        monkeypatch.setattr(bulk, "BLOCK_BYTES", block)
        got: list = []
        with pytest.raises(InputError, match=rf"corrupt MGF in entry {entry} at line {k + 1} after scan ") as err:
            got.extend(read_spectra(path))
        assert len(got) == entry - 1 and "12.5x" in str(err.value)
    path.write_text("\n".join(F13.read_text().splitlines()[:3005]) + "\n")  # cut inside an entry
    monkeypatch.setattr(bulk, "BLOCK_BYTES", 8192)
    got = []
    with pytest.raises(InputError, match=r"file ends inside an entry \(truncated\?\)"):
        got.extend(read_spectra(path))
    assert [s.scan for s in got] == [s.scan for s in read_spectra(F13)][: len(got)] and len(got) > 20
