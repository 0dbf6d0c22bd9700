"""mzXML (`rtsearch.io.mzxml`): real spectra of a yeast dev run (MS1 and MS2) written as mzXML in the layouts
converters use (nested MS2 scans, 32/64-bit, zlib or not, gzipped), read back as they were, and as pyteomics
reads the file."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from pyteomics import mzxml as pyteomics_mzxml

from rtsearch.errors import InputError
from rtsearch.io.spectra import count_spectra, read_spectra
from tests.conftest import data_dir
from tests.mzxml_cases import write_mzxml

YEAST = data_dir() / "yeast-small" / "SmallCalibratible_Yeast.mzML"


def _real() -> list:
    return list(read_spectra(YEAST, ms_levels=(1, 2)))


def test_real_spectra_through_mzxml_come_back_as_they_were(tmp_path) -> None:
    spectra = _real()
    assert {s.ms_level for s in spectra} == {1, 2}
    path = tmp_path / "ecoli.mzXML"
    write_mzxml(spectra, path)
    back = list(read_spectra(path, ms_levels=(1, 2)))
    assert [(s.scan, s.ms_level) for s in back] == [(s.scan, s.ms_level) for s in spectra]  # acquisition order
    for k, (a, b) in enumerate(zip(spectra, back, strict=True)):
        assert b.charges == a.charges and b.rt == a.rt and b.precursor_mz == a.precursor_mz and not b.problem
        tol = 0 if k % 2 == 0 else 1e-4  # 64-bit exactly, 32-bit to float32
        np.testing.assert_allclose(b.mz, a.mz, rtol=tol)
        np.testing.assert_array_equal(b.intensity, a.intensity)
    ms2 = list(read_spectra(path))
    assert [s.scan for s in ms2] == [s.scan for s in spectra if s.ms_level == 2] and count_spectra(path) == len(ms2)
    gz = tmp_path / "ecoli.mzXML.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert [s.n_peaks for s in read_spectra(gz)] == [s.n_peaks for s in ms2]
    theirs = {int(s["num"]): s for s in pyteomics_mzxml.read(str(path))}  # an independent reader of the file
    for sp in back:
        np.testing.assert_allclose(theirs[sp.scan]["m/z array"], sp.mz, rtol=1e-6)
        assert theirs[sp.scan]["msLevel"] == sp.ms_level


def test_a_cut_mzxml_fails_with_the_last_scan(tmp_path) -> None:
    path = tmp_path / "cut.mzXML"
    write_mzxml(_real(), path)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    got: list = []
    with pytest.raises(InputError, match=r"cut\.mzXML: corrupt mzXML .*after scan \d+"):
        got.extend(read_spectra(path))
    assert len(got) > 10
