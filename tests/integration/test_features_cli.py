"""``rtsearch features RUN -o FILE`` end to end on BSA1's MS1 (NumPy), and one clear line for bad input."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.integration.test_cli import one_line_error, run_cli

COLUMNS = ["mz", "charge", "isotopes", "rt_apex", "rt_start", "rt_end", "fwhm", "area", "apex_intensity"]


def test_bsa1_features_tsv_and_parquet(tmp_path: Path, data: Path) -> None:
    run = data / "bsa-orbitrapxl" / "BSA1.mzML.gz"
    out = tmp_path / "bsa1.tsv"
    proc = run_cli("features", str(run), "-o", str(out), "--backend", "numpy")
    assert proc.returncode == 0, proc.stderr
    assert "features" in proc.stdout and "564 MS1 scans" in proc.stdout and "scans skipped: none" in proc.stdout
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert list(rows[0]) == COLUMNS and len(rows) > 3000
    charge = [int(r["charge"]) for r in rows]
    assert sum(c == 2 for c in charge) > 1000 and all(0 <= c <= 6 for c in charge)
    for r in rows[:200]:
        assert float(r["rt_start"]) <= float(r["rt_apex"]) <= float(r["rt_end"]) and float(r["area"]) > 0
    pq = tmp_path / "bsa1.parquet"
    assert run_cli("features", str(run), "-o", str(pq), "--backend", "numpy", "--passes", "2").returncode == 0
    import pyarrow.parquet as parquet

    assert parquet.read_table(pq).column_names == COLUMNS


def test_bad_input_is_one_line(tmp_path: Path, data: Path) -> None:
    out = str(tmp_path / "f.tsv")
    assert "not found" in one_line_error(run_cli("features", str(tmp_path / "none.mzML"), "-o", out))
    ms2_only = data / "ecoli-small" / "Ecoli_MS2_small.mzML"
    assert "no MS1 scans" in one_line_error(run_cli("features", str(ms2_only), "-o", out))
    assert ".tsv or .parquet" in one_line_error(run_cli("features", str(ms2_only), "-o", str(tmp_path / "f.csv")))
    bad = tmp_path / "broken.mzML"
    bad.write_text("<mzML><run><spectrumList count='1'><spectrum index='0' id='scan=1'>")
    assert "broken.mzML" in one_line_error(run_cli("features", str(bad), "-o", out))
    assert "--order" in one_line_error(run_cli("features", str(ms2_only), "-o", out, "--order", "9"))
