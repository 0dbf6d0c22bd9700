"""mzXML (`rtsearch.io.mzxml`): real spectra of a yeast dev run (MS1 and MS2) written as mzXML in the layouts
converters use (nested MS2 scans, 32/64-bit, zlib or not, gzipped), read back as they were, and as pyteomics
reads the file."""

from __future__ import annotations

import base64
import gzip
import zlib

import numpy as np
import pytest
from pyteomics import mzxml as pyteomics_mzxml

from rtsearch.errors import InputError
from rtsearch.io.spectra import count_spectra, read_spectra
from tests.conftest import data_dir

YEAST = data_dir() / "yeast-small" / "SmallCalibratible_Yeast.mzML"


def _real() -> list:
    return list(read_spectra(YEAST, ms_levels=(1, 2)))


def _peaks(sp, k: int) -> str:
    bits, zipped = (32, ">f4") if k % 2 else (64, ">f8"), k % 3 == 0
    pairs = np.empty(2 * sp.n_peaks, dtype=bits[1])
    pairs[0::2], pairs[1::2] = sp.mz, sp.intensity
    raw = pairs.tobytes()
    raw = zlib.compress(raw) if zipped else raw
    comp = 'compressionType="zlib" ' if zipped else ""
    return (f'<peaks precision="{bits[0]}" byteOrder="network" {comp}pairOrder="m/z-int">'
            f"{base64.b64encode(raw).decode()}</peaks>")  # fmt: skip


def _write(spectra, path) -> None:
    """MS1 scans holding the MS2 scans that follow them (nested, as older converters wrote)."""
    out, open_ms1 = ['<?xml version="1.0" encoding="ISO-8859-1"?>\n<mzXML xmlns="http://sashimi.sourceforge.net/'
                     'schema_revision/mzXML_3.2">\n<msRun>'], False  # fmt: skip
    for k, sp in enumerate(spectra):
        head = (f'<scan num="{sp.scan}" msLevel="{sp.ms_level}" peaksCount="{sp.n_peaks}" '
                f'retentionTime="PT{sp.rt!r}S">')  # fmt: skip
        if sp.ms_level == 1:
            if open_ms1:
                out.append("</scan>")
            out.append(head + _peaks(sp, k))
            open_ms1 = True
        else:
            z = f' precursorCharge="{sp.charges[0]}"' if sp.charges else ""
            prec = f'<precursorMz precursorIntensity="{sp.precursor_intensity!r}"{z}>{sp.precursor_mz!r}</precursorMz>'
            out.append(head + prec + _peaks(sp, k) + "</scan>")
    out.append("</scan>" if open_ms1 else "")
    out.append("</msRun>\n</mzXML>\n")
    path.write_text("\n".join(out))


def test_real_spectra_through_mzxml_come_back_as_they_were(tmp_path) -> None:
    spectra = _real()
    assert {s.ms_level for s in spectra} == {1, 2}
    path = tmp_path / "ecoli.mzXML"
    _write(spectra, path)
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
    _write(_real(), path)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    got: list = []
    with pytest.raises(InputError, match=r"cut\.mzXML: corrupt mzXML .*after scan \d+"):
        got.extend(read_spectra(path))
    assert len(got) > 10
