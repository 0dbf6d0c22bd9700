"""msalign (`rtsearch.io.msalign`) in every layout under ../shared/data/topdown-*: TopFD 1.6, FLASHDeconv
(FLASHApp and OpenMS 3), IsoDec; multi-precursor fields (TopFD 1.7+); bad input named by file and line.
Golden values read off the files by eye."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from rtsearch.errors import InputError
from rtsearch.io.msalign import read_msalign
from tests.conftest import data_dir

SAMPLES = data_dir() / "topdown-format-samples"
FLASHAPP = data_dir() / "topdown-flashapp-ecoli"


@pytest.mark.parametrize(("path", "levels", "entries"), [
    (SAMPLES / "Ms1Align_TopFDv1.6.2_ms1.msalign", (1,), 265),
    (SAMPLES / "Ms2Align_TopFDv1.6.2_ms2.msalign", (2,), 42),
    (SAMPLES / "Ms2Align_FlashDeconvOpenMs3.0.0_ms2.msalign", (2,), 12),
    (SAMPLES / "Ms2Align_IsoDec1.0.0_ms2.msalign", (2,), 22),
    (FLASHAPP / "toppic_ms1.msalign", (1,), 104),
    (FLASHAPP / "toppic_ms2.msalign", (2,), 167),
    (data_dir() / "topdown-jurkat" / "JurkatTopDownRep2Fract1_ms2.msalign", (2,), 613),
])  # fmt: skip
def test_every_layout_gives_every_entry_at_its_level(path: Path, levels: tuple[int, ...], entries: int) -> None:
    assert path.read_text().count("BEGIN IONS") == entries
    got = list(read_msalign(path, ms_levels=(1, 2)))
    assert len(got) == entries and {s.ms_level for s in got} == set(levels)
    assert list(read_msalign(path, ms_levels=tuple({1, 2} - set(levels)))) == []
    for s in got:
        assert s.mass.dtype == np.float64 and s.intensity.dtype == np.float32 and s.charge.dtype == np.int16
        assert len(s.mass) == len(s.intensity) == len(s.charge) and np.all(np.diff(s.mass) >= 0)
        assert s.ms_level == 1 or bool(s.precursors) != ("no precursor mass" in s.problem)


def test_flashdeconv_entry() -> None:
    s = next(read_msalign(SAMPLES / "Ms2Align_FlashDeconvOpenMs3.0.0_ms2.msalign"))
    assert (s.run, s.scan, s.spectrum_id, s.ms1_scan, s.activation) == (
        "Ms2Align_FlashDeconvOpenMs3.0.0", 2, "2", 1, "HCD")
    assert s.rt == 0.87 and s.problem == ""
    (p,) = s.precursors
    assert (p.mass, p.mz, p.charge, p.intensity) == (687.427082, 344.721008, 2, 85166.05)
    assert s.mass.tolist()[:3] == [213.148174, 239.127534, 241.143114] and len(s.mass) == 13
    assert s.mass[-1] == 670.404066 and s.charge[-1] == 2 and s.intensity[0] == np.float32(2021.50)


def test_isodec_entry_four_columns_sorted() -> None:
    s = next(read_msalign(SAMPLES / "Ms2Align_IsoDec1.0.0_ms2.msalign"))
    assert (s.scan, s.spectrum_id, s.title, s.ms1_scan) == (1366, "0", "Scan_1366", 1365)
    assert s.precursors[0].mass == 5021.74169921875 and s.precursors[0].charge == 5
    assert len(s.mass) == 24 and np.all(np.diff(s.mass) >= 0)  # the file lists 5020.73, 5022.74, 5021.73, ...
    k = int(np.flatnonzero(s.mass == 5022.744140625)[0])
    assert s.intensity[k] == np.float32(73592.586) and s.charge[k] == 3


def test_topfd_16_without_precursor_is_a_problem_not_an_error() -> None:
    got = list(read_msalign(SAMPLES / "Ms2Align_TopFDv1.6.2_ms2.msalign"))
    first = got[0]
    assert (first.scan, first.spectrum_id, first.precursors) == (580, "0", ())
    assert "no precursor mass" in first.problem
    assert sum("no precursor mass" in s.problem for s in got) == 4  # the file's PRECURSOR_MASS=0.00000 lines


ENTRY = """BEGIN IONS
SPECTRUM_ID=7
SCANS=8
RETENTION_TIME=60.5
LEVEL=2
PRECURSOR_MZ=1001.5:1402.7
PRECURSOR_CHARGE=5:7
PRECURSOR_MASS=5002.46:9811.84
PRECURSOR_INTENSITY=1000:2000
500.25\t10.0\t1
1200.5\t20.0\t2
END IONS
"""


def test_several_precursors_of_one_window(tmp_path) -> None:
    path = tmp_path / "multi_ms2.msalign"
    path.write_text("#TopFD 1.7.0\n\n" + ENTRY)
    (s,) = read_msalign(path)
    assert s.run == "multi" and s.scan == 8 and s.rt == 60.5
    assert [(p.mass, p.mz, p.charge, p.intensity) for p in s.precursors] == [
        (5002.46, 1001.5, 5, 1000.0), (9811.84, 1402.7, 7, 2000.0)]
    gz = tmp_path / "multi_ms2.msalign.gz"
    with open(path, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    (g,) = read_msalign(gz)
    assert g.precursors == s.precursors and np.array_equal(g.mass, s.mass)


@pytest.mark.parametrize(("text", "message"), [
    (ENTRY + ENTRY[: ENTRY.index("1200.5")], "line 13 after scan 8: file ends inside this entry (truncated?)"),
    (ENTRY.replace("1200.5\t20.0\t2", "1200.5\tabc\t2"), "line 11: could not convert string to float: 'abc'"),
    (ENTRY.replace("1200.5\t20.0\t2", "1200.5"), "line 11: expected 'mass intensity charge', got '1200.5'"),
    ("hello\n" + ENTRY, "line 1: expected BEGIN IONS, got 'hello'"),
    (ENTRY.replace("END IONS\n", ""), "file ends inside this entry"),
    (ENTRY.replace("END IONS\n", "") + ENTRY, "line 12: BEGIN IONS inside an entry"),
    (ENTRY.replace("1200.5\t20.0\t2", "1200.5\t20.0\t2\nTITLE=late"), "line 12: parameter 'TITLE' after the peaks"),
])  # fmt: skip
def test_a_broken_file_is_one_error_naming_file_and_line(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "bad_ms2.msalign"
    path.write_text(text)
    with pytest.raises(InputError, match="corrupt msalign") as err:
        list(read_msalign(path))
    assert str(err.value).startswith(str(path)) and message in str(err.value)


@pytest.mark.parametrize(("edit", "problem"), [
    (("PRECURSOR_MASS=5002.46:9811.84", "PRECURSOR_MASS=0:0"), "no precursor mass"),
    (("500.25\t10.0\t1", "-500.25\t10.0\t1"), "fragment masses not all finite and > 0"),
    (("500.25\t10.0\t1\n1200.5\t20.0\t2\n", ""), "no peaks"),
    (("PRECURSOR_CHARGE=5:7", "PRECURSOR_CHARGE=5:7:9"), "precursor fields of different lengths"),
])  # fmt: skip
def test_an_unsearchable_spectrum_is_given_with_its_problem(tmp_path, edit: tuple[str, str], problem: str) -> None:
    path = tmp_path / "odd_ms2.msalign"
    path.write_text(ENTRY.replace(*edit))
    (s,) = read_msalign(path)
    assert problem in s.problem


def test_a_missing_file_is_an_error_at_once(tmp_path) -> None:
    with pytest.raises(InputError, match="cannot read msalign file"):
        read_msalign(tmp_path / "none.msalign").__next__()
