"""Spectral library import: MSP and sptxt parsing, preprocessing, decoys and the store, on the real samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pyteomics import mass as pymass

from rtsearch.cli import main
from rtsearch.errors import InputError
from rtsearch.library.files import LibraryEntry, Malformed, read_library
from rtsearch.library.store import LibraryParams, decoy_entry, import_library, load_library, preprocess_peaks
from rtsearch.types import PROTON


@pytest.fixture(scope="module")
def libs(data: Path) -> Path:
    return data / "spectral-libraries"


def _entries(path: Path) -> list[LibraryEntry | Malformed]:
    return list(read_library(path))


def test_msp_golden_entry(libs):
    entries = _entries(libs / "nist-bsa_consensus.msp")
    assert len(entries) == 725 and not any(isinstance(e, Malformed) for e in entries)
    e = entries[0]
    assert isinstance(e, LibraryEntry)
    assert e.peptide == "AADDKEAC[Carbamidomethyl]FAVEGPK" and e.charge == 3 and e.number == 1
    want = (pymass.calculate_mass(sequence="AADDKEACFAVEGPK") + 57.021464 + 3 * PROTON) / 3
    assert e.precursor_mz == pytest.approx(want, abs=1e-5)
    assert e.precursor_mz == pytest.approx(536.584, abs=0.001)  # the file's Parent=
    assert len(e.mz) == 110 and e.mz[0] == 175.2 and e.intensity[0] == 139
    assert e.protein.startswith("sp|P02769|ALBU_BOVIN")
    # NIST's inline M(O) with the comment's Mods
    forms = {x.peptide for x in entries if isinstance(x, LibraryEntry) and x.sequence == "MPCTEDYLSLILNR"}
    assert "M[Oxidation]PC[Carbamidomethyl]TEDYLSLILNR" in forms  # entry 455, "M(O)PCTEDYLSLILNR/2"


def test_nist_parenthesized_mods_and_a_truncated_entry(libs):
    entries = _entries(libs / "chinese_hamster_hcd_selected_head.msp")
    assert len(entries) == 7
    first = entries[0]
    assert isinstance(first, LibraryEntry) and first.peptide == "AAAAC[Carbamidomethyl]ALTPGPLADLAAR"
    last = entries[6]
    assert isinstance(last, Malformed) and last.number == 7 and last.reason == "213 peak lines, header says 402"


def test_sptxt_entries(libs):
    (a, b) = _entries(libs / "testlib.sptxt")
    assert isinstance(a, LibraryEntry) and a.peptide == "FAIPAINVTSSSTAVAALEAAR" and a.charge == 2
    assert len(a.mz) == 150 and a.precursor_mz == pytest.approx(1080.5866, abs=0.01)
    assert isinstance(b, LibraryEntry)
    icat = _entries(libs / "HumanPlasma_2012-08_all.selected_head.sptxt")
    assert [e.peptide for e in icat if isinstance(e, LibraryEntry)][0] == "AAFIC[ICAT-C:13C(9)]PGSSR"


def test_unusable_entries_are_reported_not_raised(libs, tmp_path):
    broad = _entries(libs / "broad_tcga_nonphospho_consensus_rec.head.msp")  # clusters without a peptide
    assert [e.number for e in broad] == list(range(1, 21))
    assert all(isinstance(e, Malformed) and "no peptide" in e.reason for e in broad)
    bad = tmp_path / "bad.msp"
    bad.write_text(
        "Name: PEPTIDEK/2\nNum peaks: 2\n100.0 abc\n200.0 5\n"
        "Name: PEPXIDEK/2\nNum peaks: 1\n100.0 1\n"
        "Name: PEPTIDEK/0\nNum peaks: 1\n100.0 1\n"
        "Name: PEPTIDEK/2\nComment: Mods=1/3,T,Frobnicated\nNum peaks: 1\n100.0 1\n"
        "Name: PEPTIDEK/2\nComment: Parent=900.0\nNum peaks: 1\n100.0 1\n"
        "Name: PEPTIDEK/2\nNum peaks: 0\n"
        "Name: PEPTIDEK/2\nNum peaks: 1\n100.0 -3\n"
    )
    got = [(e.number, e.reason) for e in _entries(bad)]
    assert got == [
        (1, "unreadable peak line"), (2, "unknown residue 'X'"), (3, "charge 0 out of range"),
        (4, "unknown modification 'Frobnicated'"),
        (5, "precursor m/z 900.0000 does not match PEPTIDEK/2 (464.7347)"), (6, "no peaks"),
        (7, "peaks hold NaN, infinite or negative values"),
    ]  # fmt: skip
    with pytest.raises(InputError):
        list(read_library(tmp_path / "missing.msp"))


def test_preprocess_golden() -> None:
    # 100.2 and 100.5 share bin floor(x / 1.0005) = 100; 300.0 is bin 299; 499.0 is within 2 Da of the
    # precursor (removed); 700.0 has no intensity (dropped). sqrt: 3 + 4 = 7 in bin 100, 24 in bin 299;
    # norm sqrt(49 + 576) = 25 -> 0.28 and 0.96
    mz = np.array([100.2, 100.5, 300.0, 499.0, 700.0])
    inten = np.array([9.0, 16.0, 576.0, 1000.0, 0.0])
    bins, values = preprocess_peaks(mz, inten, 500.0, LibraryParams())
    assert bins.tolist() == [100, 299] and bins.dtype == np.int32
    np.testing.assert_allclose(values, [0.28, 0.96], rtol=1e-6)
    bins, values = preprocess_peaks(mz, inten, 500.0, LibraryParams(top_peaks=1))
    assert bins.tolist() == [299] and values.tolist() == [1.0]


def test_decoy_shuffles_and_repositions(libs):
    e = next(x for x in _entries(libs / "nist-bsa_consensus.msp") if isinstance(x, LibraryEntry))
    params = LibraryParams()
    d = decoy_entry(e, params)
    again = decoy_entry(e, params)
    assert d is not None and again is not None  # seeded: the same decoy every time
    assert again.peptide == d.peptide and np.array_equal(again.mz, d.mz)
    assert d.sequence != e.sequence and sorted(d.sequence) == sorted(e.sequence) and d.sequence[-1] == "K"
    assert d.precursor_mz == e.precursor_mz and d.charge == e.charge
    assert sorted(d.intensity.tolist()) == sorted(e.intensity.tolist())
    assert [d.sequence[p] for p, _, _ in d.mods] == ["C"] and "C[Carbamidomethyl]" in d.peptide
    from rtsearch.library.store import _fragments

    def matched(entry: LibraryEntry) -> int:
        ions = _fragments(entry.sequence, entry.mods, entry.charge).ravel()
        return int((np.abs(entry.mz[:, None] - ions[None, :]).min(axis=1) <= 0.5).sum())

    # the target's annotated-looking peaks moved onto the decoy's own b/y ions
    assert matched(d) >= matched(e) > 20
    assert decoy_entry(LibraryEntry(1, "AK", "AK", (), 1, 100.0, np.zeros(0), np.zeros(0, np.float32)),
                       params) is None  # fmt: skip


def test_store_round_trip_and_replacement(libs, tmp_path):
    out = tmp_path / "lib"
    names = ("nist-bsa_consensus.msp", "testlib.sptxt", "broad_tcga_nonphospho_consensus_rec.head.msp")
    files = [libs / n for n in names]
    report = import_library(files, out)
    assert (report.read, report.targets, report.decoys, len(report.malformed)) == (747, 727, 727, 20)
    lib = load_library(out)
    assert len(lib) == 1454 and int(lib.decoy.sum()) == 727
    assert (np.diff(lib.precursor_mz) >= 0).all()
    for e in (0, 700, 1453):
        _, v = lib.peaks(e)
        assert float((v.astype(np.float64) ** 2).sum()) == pytest.approx(1.0, rel=1e-5)
    t = lib.peptides.index("AADDKEAC[Carbamidomethyl]FAVEGPK")
    assert not lib.decoy[t] and lib.charge[t] == 3
    r = lib.within(lib.precursor_mz[t] - 0.01, lib.precursor_mz[t] + 0.01)
    assert t in r and all(abs(lib.precursor_mz[i] - lib.precursor_mz[t]) <= 0.01 for i in r)
    assert lib.manifest["counts"]["malformed"] == 20
    # a second import replaces the store; a folder that is not one is refused
    import_library(files[:1], out, LibraryParams(decoys=False))
    assert len(load_library(out)) == 725
    other = tmp_path / "notalib"
    other.mkdir()
    (other / "x").write_text("keep me")
    with pytest.raises(InputError):
        import_library(files[:1], other)
    assert (other / "x").read_text() == "keep me"
    with pytest.raises(InputError):
        load_library(other)


def test_cli_library_import(libs, tmp_path, capsys):
    out = tmp_path / "lib"
    rc = main(["library", "import", str(libs / "chinese_hamster_hcd_selected_head.msp"), "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "entry 7 (AAAALGSHGSCSSEVEK/2_1(10,C,CAM)_52eV): 213 peak lines, header says 402" in text
    assert "7 entries read from 1 file(s): 6 imported, 1 not imported, 6 decoys added" in text
    assert main(["library", "import", str(tmp_path / "nope.msp"), "--out", str(out)]) == 2
    assert "library file not found" in capsys.readouterr().err
    assert main(["library", "import", str(libs / "testlib.sptxt"), "--out", str(out), "--top-peaks", "0"]) == 2
    capsys.readouterr()
    assert main(["library", "info", str(out)]) == 0
    info = capsys.readouterr().out
    assert "entries      12: 6 target, 6 decoy (1 not imported)" in info and "top_peaks                  150" in info
    assert main(["library", "info", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["entries"] == 12
    assert main(["library", "info", str(tmp_path)]) == 2
    assert "not a spectral library folder" in capsys.readouterr().err


def test_parse_proforma_golden():
    from rtsearch.library.consensus import parse_proforma

    assert parse_proforma("[Acetyl]-AC[Carbamidomethyl]M[Oxidation]K") == (
        "ACMK", [(-1, "Acetyl"), (1, "Carbamidomethyl"), (2, "Oxidation")])  # fmt: skip
    assert parse_proforma("PEPTIDEK") == ("PEPTIDEK", [])
    with pytest.raises(ValueError):
        parse_proforma("pep")


def test_consensus_golden():
    from rtsearch.library.consensus import consensus

    # replicate 1 scaled to its top peak: 100 -> 1.0, 200 -> 0.5; replicate 2: 100.01 -> 1.0, 300 -> 1.0.
    # 100 and 100.01 cluster (0.02 Th): m/z (100 * 1 + 100.01 * 1) / 2, intensity (1 + 1) / 2; 200: 0.5 / 2; 300: 1 / 2.
    # Two replicates keep every cluster.
    reps = [(np.array([100.0, 200.0]), np.array([10.0, 5.0])), (np.array([100.01, 300.0]), np.array([20.0, 20.0]))]
    mz, inten = consensus(reps, peak_tolerance=0.02, quorum=0.6, top_peaks=150)
    np.testing.assert_allclose(mz, [100.005, 200.0, 300.0])
    np.testing.assert_allclose(inten, [1.0, 0.25, 0.5])
    # a third replicate with only 100.0: quorum 0.6 of 3 needs 2 -> only the 100 cluster stays, (1 + 1 + 1) / 3
    mz, inten = consensus([*reps, (np.array([100.0]), np.array([7.0]))], peak_tolerance=0.02, quorum=0.6,
                          top_peaks=150)  # fmt: skip
    np.testing.assert_allclose(mz, [(100.0 + 100.01 + 100.0) / 3])
    np.testing.assert_allclose(inten, [1.0])


def test_cli_library_build_refuses_bad_input(libs, tmp_path, capsys, data):
    run = data / "ecoli-small/Ecoli_MS2_small.mzML"
    assert main(["library", "build", str(tmp_path / "none.tsv"), str(run), "--out", str(tmp_path / "o.msp")]) == 2
    assert "file not found" in capsys.readouterr().err
    other = tmp_path / "other.tsv"
    other.write_text("a\tb\n1\t2\n")
    assert main(["library", "build", str(other), str(run), "--out", str(tmp_path / "o.msp")]) == 2
    assert "not a readable rtsearch results file" in capsys.readouterr().err
    empty = tmp_path / "empty.tsv"
    empty.write_text("run\tscan\tpeptide\tcharge\tproteins\tis_decoy\tq_value\nx\t1\tPEPTIDEK\t2\tP\tfalse\t0.5\n")
    assert main(["library", "build", str(empty), str(run), "--out", str(tmp_path / "o.msp")]) == 2
    assert "no identification at q <= 0.01" in capsys.readouterr().err
    assert main(["library", "build", str(empty), str(run), "--out", str(tmp_path / "o.msp"), "--quorum", "0"]) == 2
    assert main(["search", str(run), "--library", str(tmp_path), "-o", str(tmp_path / "r.tsv")]) == 2
    assert "not a spectral library folder" in capsys.readouterr().err
    assert not (tmp_path / "o.msp").exists()


def test_a_mass_is_named_by_the_nearest_unimod_delta() -> None:
    from rtsearch.library.files import _label

    # TMTpro (304.207146) and iTRAQ8plex (304.20536) are 0.0018 Da apart: each mass gets its own name
    assert _label(304.2071) == "TMTpro" and _label(304.2054) == "iTRAQ8plex"
    assert _label(57.0215) == "Carbamidomethyl" and _label(123.4567) == "+123.4567"
