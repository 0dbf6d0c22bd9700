"""Every spectral library in the shared data either imports or says, entry by entry, why not; EncyclopeDIA's
SQLite libraries (.dlib, .elib) import with their peaks and modifications as stored."""

from __future__ import annotations

import sqlite3
import zlib

import numpy as np
import pytest

from rtsearch.errors import InputError
from rtsearch.library.files import LibraryEntry, Malformed
from rtsearch.library.formats import read_entries
from rtsearch.library.store import import_library


def test_each_shared_library_imports_or_lists_every_rejected_entry(data, tmp_path) -> None:
    files = sorted((data / "spectral-libraries").iterdir())
    assert len(files) >= 9
    imported = 0
    for path in files:
        items = list(read_entries(path))
        bad = [i for i in items if isinstance(i, Malformed)]
        assert items and all(i.reason for i in bad), path
        try:
            report = import_library([path], tmp_path / f"{path.name}.lib")
        except InputError as e:  # nothing usable: the message names every entry and its reason
            lines = str(e).splitlines()[1:]
            assert len(lines) == len(bad) == len(items), path
            pairs = zip(bad, lines, strict=True)
            assert all(f"entry {b.number} " in line and line.endswith(b.reason) for b, line in pairs)
            continue
        assert report.targets + len(report.malformed) == report.read == len(items) and report.targets > 0
        imported += 1
    assert imported >= 7  # MSP, sptxt, .dlib and .elib among them


@pytest.mark.parametrize("name", ["PrositLib.dlib", "BCS_hela.elib"])
def test_encyclopedia_entries_keep_their_peaks_and_modifications(data, name) -> None:
    path = data / "spectral-libraries" / name
    con = sqlite3.connect(path)
    rows = con.execute("SELECT PeptideModSeq, PrecursorCharge, MassArray, IntensityArray FROM entries").fetchall()
    entries = [e for e in read_entries(path) if isinstance(e, LibraryEntry)]
    assert len(entries) == len(rows)  # every entry of these two is usable
    modified = 0
    for e, (modseq, charge, masses, intensities) in zip(entries, rows, strict=True):
        mz = np.frombuffer(zlib.decompress(masses), ">f8")
        assert e.charge == charge and np.array_equal(e.mz, np.sort(mz))
        assert np.isclose(e.intensity.sum(), np.frombuffer(zlib.decompress(intensities), ">f4").sum(), rtol=1e-5)
        if "[+57.02" in modseq:
            modified += 1
            assert e.peptide.count("C[Carbamidomethyl]") == modseq.count("C[+57.02"), (e.peptide, modseq)
    assert modified > 20


def test_a_file_that_is_not_an_encyclopedia_library_is_one_clear_error(tmp_path) -> None:
    fake = tmp_path / "x.dlib"
    fake.write_text("Name: PEPTIDE/2\n")
    with pytest.raises(InputError, match="not an EncyclopeDIA library"):
        list(read_entries(fake))
