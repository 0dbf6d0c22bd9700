"""The MSP that ``rtsearch library build`` writes is what the field's readers read (issue 73): mzspeclib (in the
interop environment, tests/interop/read_msp.py) reads every entry with the peptide, charge and peak count
rtsearch's own reader reads; ``MW`` is NIST's, the precursor m/z times the charge (written as the neutral mass
before, mzspeclib read 0 of 76 entries)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from rtsearch.cli import main
from rtsearch.library.files import LibraryEntry, read_library
from tests.devruns import DEV_RUNS

ROOT = Path(__file__).resolve().parents[2]
INTEROP = ROOT / ".venv-interop" / "bin" / "python"


@pytest.fixture(scope="module")
def msp(data, dev_indexes, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("msp")
    (bsa1,) = [d for d in DEV_RUNS if d.name == "BSA1"]
    run = data / bsa1.run
    assert main(["search", str(run), "--index", str(dev_indexes[bsa1.fastas]), "-o", str(tmp / "r.tsv")]) == 0
    assert main(["library", "build", str(tmp / "r.tsv"), str(run), "--out", str(tmp / "bsa1.msp"),
                 "--max-q", "0.05"]) == 0  # fmt: skip
    return tmp / "bsa1.msp"


def test_mzspeclib_reads_every_entry_as_rtsearch_does(msp):
    ours = [e for e in read_library(msp) if isinstance(e, LibraryEntry)]
    assert len(ours) == msp.read_text().count("Name: ") >= 20
    assert INTEROP.exists(), "the interop environment is missing: scripts/test makes it (.venv-interop, mzspeclib)"
    res = subprocess.run([str(INTEROP), str(ROOT / "tests/interop/read_msp.py"), str(msp)], capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = json.loads(res.stdout)
    assert theirs == [[f"{e.peptide}/{e.charge}", e.charge, len(e.mz)] for e in ours]
    assert any("[Carbamidomethyl]" in p for p, _, _ in theirs)


def test_mw_is_the_precursor_mz_times_the_charge(msp):
    text = msp.read_text()
    entries = re.findall(r"Name: \S+/(\d+)\nMW: ([\d.]+)\nComment: \S+ Parent=([\d.]+)", text)
    assert entries
    for z, mw, parent in entries:
        assert float(mw) == pytest.approx(float(parent) * int(z), abs=2e-4)
