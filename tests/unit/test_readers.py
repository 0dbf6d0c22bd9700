"""Tests for `rtsearch.io.spectra` on the real files in shared/data and on slices of them.

Golden values (first scan, precursor m/z, charge, retention time) were copied by
hand from the text of each file, not from the reader.
"""

from __future__ import annotations

import gzip
import math
import re
from pathlib import Path

import numpy as np
import pytest

from rtsearch.errors import InputError
from rtsearch.io.spectra import count_spectra, read_spectra, run_name
from rtsearch.types import PROTON, Spectrum
from tests.conftest import data_dir

DATA = data_dir()

BSA = DATA / "bsa-orbitrapxl" / "BSA1.mzML.gz"
ECOLI = DATA / "ecoli-small" / "Ecoli_MS2_small.mzML"
DEMO = DATA / "yeast-small" / "demo.ms2"
YEAST = DATA / "yeast-small" / "SmallCalibratible_Yeast.mzML"
F13 = DATA / "iprg2013-f13" / "F13.mgf"

# file -> (MS2 count, MS1 count), from shared/data/README.md and grep of the files
COUNTS = {BSA: (1120, 564), ECOLI: (139, 0), DEMO: (150, 0), YEAST: (118, 24), F13: (1406, 0)}


@pytest.fixture(scope="module")
def bsa() -> list[Spectrum]:
    return list(read_spectra(BSA))


@pytest.fixture(scope="module")
def spectra(bsa: list[Spectrum]) -> dict[Path, list[Spectrum]]:
    out = {p: list(read_spectra(p)) for p in COUNTS if p != BSA}
    out[BSA] = bsa
    return out


def _check_spectrum(s: Spectrum) -> None:
    assert s.problem == "", s.problem
    assert isinstance(s.scan, int)
    assert s.mz.dtype == np.float64 and s.intensity.dtype == np.float32
    assert s.mz.shape == s.intensity.shape and s.mz.size > 0
    assert np.all(np.diff(s.mz) >= 0)
    assert np.isfinite(s.mz).all() and np.isfinite(s.intensity).all()


# --- real files -----------------------------------------------------------------------------

@pytest.mark.parametrize("path", list(COUNTS), ids=lambda p: p.name)
def test_ms2_counts_unique_scans_and_arrays(
    path: Path, spectra: dict[Path, list[Spectrum]]
) -> None:
    got = spectra[path]
    assert len(got) == COUNTS[path][0]
    assert len({s.scan for s in got}) == len(got)
    for s in got:
        _check_spectrum(s)
        assert s.ms_level == 2 and s.precursor_mz > 0 and s.charges
        assert s.run == run_name(path)


@pytest.mark.parametrize("path", [ECOLI, DEMO, YEAST, F13], ids=lambda p: p.name)
def test_ms1_counts(path: Path) -> None:
    ms1 = list(read_spectra(path, ms_levels=(1,)))
    assert len(ms1) == COUNTS[path][1]
    assert all(s.ms_level == 1 for s in ms1)


def test_bsa_ms1_and_both_levels() -> None:
    both = list(read_spectra(BSA, ms_levels=(1, 2)))
    ms1 = [s for s in both if s.ms_level == 1]
    assert len(ms1) == 564 and len(both) == 564 + 1120
    # <spectrum id="spectrum=1011" ...> ms level 1, scan start time 1501.41394042969 second
    assert ms1[0].scan == 1011 and ms1[0].rt == pytest.approx(1501.41394042969)
    assert ms1[0].problem == "" and ms1[0].precursor_mz == 0.0


@pytest.mark.parametrize("path", list(COUNTS), ids=lambda p: p.name)
def test_count_spectra_estimate(path: Path) -> None:
    assert count_spectra(path) == COUNTS[path][0]


def test_bsa_first_ms2_and_rt_range(bsa: list[Spectrum]) -> None:
    first = bsa[0]
    # <spectrum id="spectrum=2442" index="564" ...>, scan start time 1503.96166992188 second,
    # selected ion m/z 457.723968505859, charge state 2
    assert (first.run, first.scan, first.ms_level) == ("BSA1", 2442, 2)
    assert first.precursor_mz == pytest.approx(457.723968505859)
    assert first.charges == (2,)
    assert first.rt == pytest.approx(1503.96166992188)
    assert first.n_peaks == 102  # defaultArrayLength="102"
    assert all(1501.0 <= s.rt <= 2500.0 for s in bsa)
    assert max(max(s.charges) for s in bsa) == 6  # README: precursors up to 6+


def test_ecoli_first_spectrum(spectra: dict[Path, list[Spectrum]]) -> None:
    first = spectra[ECOLI][0]
    # id="controllerType=0 controllerNumber=1 scan=11461", 617.318542480469, 2+, 5000.0916 s
    assert first.scan == 11461 and first.charges == (2,) and first.n_peaks == 260
    assert first.native_id == "controllerType=0 controllerNumber=1 scan=11461"
    assert first.precursor_mz == pytest.approx(617.318542480469)
    assert first.rt == pytest.approx(5000.0916)


def test_yeast_mzml_rt_minutes_to_seconds(spectra: dict[Path, list[Spectrum]]) -> None:
    first = spectra[YEAST][0]
    # scan=2: scan start time 24.061071666667 minute, selected ion m/z 488.734252929688,
    # charge state 2, peak intensity 3.28444175e06
    assert first.scan == 2 and first.charges == (2,)
    assert first.precursor_mz == pytest.approx(488.734252929688)
    assert first.rt == pytest.approx(24.061071666667 * 60)
    assert first.precursor_intensity == pytest.approx(3.28444175e06, rel=1e-6)
    assert all(20 * 60 < s.rt < 30 * 60 for s in spectra[YEAST])


def test_demo_ms2_charges_and_rt(spectra: dict[Path, list[Spectrum]]) -> None:
    demo = spectra[DEMO]
    # S 10 10 636.34 / Z 2 1271.67
    assert (demo[0].scan, demo[0].precursor_mz, demo[0].charges) == (10, 636.34, (2,))
    assert demo[0].rt == 0.0  # no I RTime line
    by_scan = {s.scan: s for s in demo}
    assert by_scan[14].charges == (2, 3)  # Z 2 1117.19 / Z 3 1675.28
    assert by_scan[14].rt == pytest.approx(9.2816 * 60)  # I RTime 9.2816 (minutes)
    assert by_scan[13].charges == (1,)
    assert sum(s.charges == (2, 3) for s in demo) == 16
    assert sum(s.rt > 0 for s in demo) == 76


def test_f13_first_spectrum(spectra: dict[Path, list[Spectrum]]) -> None:
    first = spectra[F13][0]
    # TITLE=scan=144 / PEPMASS=319.7108 / SCANS=144 / CHARGE=2+ / 25 peaks
    assert (first.scan, first.precursor_mz, first.charges) == (144, 319.7108, (2,))
    assert first.native_id == "scan=144"  # its TITLE
    assert first.n_peaks == 25
    assert first.mz[0] == 105.01811 and first.intensity[0] == np.float32(73.3644)


def test_run_name() -> None:
    assert run_name(BSA) == "BSA1"
    assert run_name("a/b/x.MZML") == "x"
    assert run_name("F13.MGF") == "F13"
    assert run_name("demo.ms2") == "demo"
    assert run_name("run.mzml.GZ") == "run"


# --- slices of real files ----------------------------------------------------------------------

def _mgf_entries(n: int) -> list[str]:
    text = F13.read_text()
    return [e + "END IONS\n" for e in text.split("END IONS\n")[:n]]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_default_charges_only_when_file_has_none(tmp_path: Path) -> None:
    entries = _mgf_entries(2)
    entries[0] = entries[0].replace("CHARGE=2+\n", "")
    path = _write(tmp_path, "nocharge.mgf", "".join(entries))
    got = list(read_spectra(path, default_charges=(2, 3, 4)))
    assert got[0].charges == (2, 3, 4) and got[1].charges == (2,)
    assert list(read_spectra(path))[0].charges == ()


def test_mgf_charge_forms_rt_and_unsorted_peaks(tmp_path: Path) -> None:
    entry = _mgf_entries(1)[0]
    lines = entry.splitlines()
    peaks = [ln for ln in lines if ln[:1].isdigit()]
    head = [ln for ln in lines if not ln[:1].isdigit() and ln != "END IONS"]
    texts = [entry.replace("CHARGE=2+", "CHARGE=2+ and 3+"),
             entry.replace("CHARGE=2+", "CHARGE=2+,3+\nRTINSECONDS=1234.5"),
             "\n".join(head + peaks[::-1] + ["END IONS", ""])]
    got = list(read_spectra(_write(tmp_path, "forms.mgf", "".join(texts))))
    assert [s.charges for s in got] == [(2, 3), (2, 3), (2,)]
    assert got[1].rt == 1234.5 and got[0].rt == 0.0
    assert all(s.problem == "" for s in got)
    np.testing.assert_array_equal(got[2].mz, got[0].mz)
    np.testing.assert_array_equal(got[2].intensity, got[0].intensity)


def test_mgf_missing_pepmass_nan_and_empty(tmp_path: Path) -> None:
    e1, e2, e3, e4 = _mgf_entries(4)
    e2 = e2.replace("PEPMASS=348.20612\n", "")
    e3 = re.sub(r"(?m)^(\S+)\t\S+$", r"\1\tnan", e3, count=1)
    e4 = "\n".join(ln for ln in e4.splitlines() if not ln[:1].isdigit()) + "\n"
    got = list(read_spectra(_write(tmp_path, "bad.mgf", e1 + e2 + e3 + e4)))
    assert [s.scan for s in got] == [144, 1664, 1688, int(re.findall(r"SCANS=(\d+)", e4)[0])]
    assert got[0].problem == ""
    assert "MGF entry 2 has no PEPMASS" in got[1].problem and "scan=1664" in got[1].problem
    assert got[1].n_peaks == 45 and got[1].charges == (2,)
    assert got[2].problem.startswith("non-finite")
    assert got[3].problem == "empty spectrum" and got[3].n_peaks == 0


def test_mgf_truncated(tmp_path: Path) -> None:
    path = _write(tmp_path, "cut.mgf", "\n".join(F13.read_text().splitlines()[:100]) + "\n")
    got: list[Spectrum] = []
    with pytest.raises(InputError) as err:
        got.extend(read_spectra(path))
    assert [s.scan for s in got] == [144, 1664]
    msg = str(err.value)
    assert "cut.mgf" in msg and "after scan 1664" in msg and "\n" not in msg


def test_mgf_garbled_line(tmp_path: Path) -> None:
    lines = "".join(_mgf_entries(4)).splitlines()
    assert lines[40][:1].isdigit()  # a peak line of entry 2 (scan 1664)
    lines[40] = "12.5x garbage"
    got: list[Spectrum] = []
    with pytest.raises(InputError, match=r"garbled\.mgf.* line 41 after scan 144") as err:
        got.extend(read_spectra(_write(tmp_path, "garbled.mgf", "\n".join(lines) + "\n")))
    assert [s.scan for s in got] == [144] and "\n" not in str(err.value)


def test_ms2_missing_precursor_and_garbled(tmp_path: Path) -> None:
    lines = DEMO.read_text().splitlines()[:600]
    assert lines[5] == "S\t10\t10\t636.34"
    lines[5] = "S\t10\t10"
    got = list(read_spectra(_write(tmp_path, "noprec.ms2", "\n".join(lines) + "\n")))
    assert [s.scan for s in got] == [10, 11]
    assert got[0].problem == "missing precursor m/z" and got[1].problem == ""
    lines[20] = "abc def"
    with pytest.raises(InputError, match=r"garbled\.ms2.* line 21"):
        list(read_spectra(_write(tmp_path, "garbled.ms2", "\n".join(lines) + "\n")))


def test_truncated_mzml(tmp_path: Path) -> None:
    raw = ECOLI.read_bytes()
    path = tmp_path / "cut.mzML"
    path.write_bytes(raw[: len(raw) // 2])
    got: list[Spectrum] = []
    with pytest.raises(InputError, match=r"cut\.mzML.*after scan") as err:
        got.extend(read_spectra(path))
    assert 0 < len(got) < 139 and "\n" not in str(err.value)


def test_truncated_and_bad_gzip(tmp_path: Path) -> None:
    raw = ECOLI.read_bytes()
    cut = tmp_path / "cut.mzML.gz"
    packed = gzip.compress(raw)
    cut.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(InputError, match=r"cut\.mzML\.gz"):
        list(read_spectra(cut))
    fake = tmp_path / "plain.mzML.gz"
    fake.write_bytes(raw[:5000])
    with pytest.raises(InputError, match=r"plain\.mzML\.gz"):
        list(read_spectra(fake))


def test_mzml_spectrum_without_precursor_is_flagged(tmp_path: Path) -> None:
    text = ECOLI.read_text()
    text = re.sub(r"<precursorList.*?</precursorList>", "", text, count=1, flags=re.S)
    got = list(read_spectra(_write(tmp_path, "noprec.mzML", text)))
    assert len(got) == 139
    assert got[0].problem == "missing precursor m/z" and got[0].n_peaks == 260
    assert all(s.problem == "" for s in got[1:])


def test_mzml_bad_binary_arrays_are_flagged(tmp_path: Path) -> None:
    text = ECOLI.read_text()
    spans = [m.span(1) for m in re.finditer(r"<binary>([^<]*)</binary>", text)][:4]
    # spectrum 1: intensity array cut to 3 values; spectrum 2: m/z array cut to 6 bytes
    (a, b), (c, d) = spans[1], spans[2]
    text = text[:a] + text[a : a + 16] + text[b:c] + text[c : c + 8] + text[d:]
    got = list(read_spectra(_write(tmp_path, "badarrays.mzML", text)))
    assert len(got) == 139 and all(s.problem == "" for s in got[2:])
    assert got[0].problem.startswith("mismatched array lengths") and got[0].n_peaks == 3
    assert got[1].problem.startswith("undecodable peak array")


def test_unknown_extension_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="spectra.txt"):
        list(read_spectra(_write(tmp_path, "spectra.txt", "x")))
    with pytest.raises(InputError, match="absent.mzML"):
        list(read_spectra(tmp_path / "absent.mzML"))
    assert count_spectra(tmp_path / "absent.mgf") is None
    # msalign: deconvoluted spectra, read as singly protonated ones (top-down search)
    first = next(read_spectra(data_dir() / "topdown-flashapp-ecoli" / "toppic_ms2.msalign"))
    assert first.charges == (1,) and first.scan == 3099 and first.precursor_mz == pytest.approx(9105.353595 + PROTON)
    with pytest.raises(InputError, match=r"\.msalign"):
        list(read_spectra(tmp_path / "absent.msalign"))


def test_reading_is_lazy() -> None:
    it = read_spectra(BSA, ms_levels=(1,))
    first = next(it)
    assert first.scan == 1011 and not math.isnan(first.rt)
