"""The top-down negative control: the human Jurkat run against the E. coli proteoforms reports no PrSM (issue 70).

The FLASHApp E. coli database (4,426 proteins, its shuffled DECOY_ proteins), the Jurkat fraction's first 150
spectra on NumPy with ``[topdown] truncations = false`` (whole N-terminal forms: the CPU's time for a test); its
reported PrSM and proteoform q-values ((decoys + 1) / targets) counted from the results file, none at 5 %.
Measured 2026-12-07: 58 of the 150 matched to a target, none at 1 % or 5 % (on the first 100: 36 targets / 29
decoys scored, none at 1 % by decoys / targets either).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from rtsearch.cli import main

SPECTRA = 150


def head(msalign: Path, n: int, out: Path) -> Path:
    """The first ``n`` spectra of an msalign file (its header kept)."""
    blocks = msalign.read_text().split("END IONS")
    out.write_text("END IONS".join(blocks[:n]) + "END IONS\n")
    return out


@pytest.mark.slow
def test_the_jurkat_run_against_the_ecoli_proteoforms(data, tmp_path):
    db = data / "topdown-flashapp-ecoli/example_database.fasta"
    assert main(["proteoforms", "build", "--fasta", str(db), "--out", str(tmp_path / "pf")]) == 0
    (tmp_path / "td.toml").write_text("[topdown]\ntruncations = false\n")
    run = head(data / "topdown-jurkat/JurkatTopDownRep2Fract1_ms2.msalign", SPECTRA, tmp_path / "jurkat.msalign")
    out = tmp_path / "out.tsv"
    assert main(["search", str(run), "--proteoforms", str(tmp_path / "pf"), "--config", str(tmp_path / "td.toml"),
                 "--backend", "numpy", "-o", str(out)]) == 0  # fmt: skip
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    targets = [r for r in rows if r["q_value"] != "" and r["is_decoy"] == "false"]
    print(f"\nJurkat vs E. coli proteoforms: {len(rows)} spectra, {len(targets)} targets scored")
    assert len(rows) == SPECTRA and len(targets) > 10  # scored, and matched to something
    assert not [r for r in targets if float(r["q_value"]) <= 0.05 or float(r["peptide_q_value"]) <= 0.05]
