"""``rtsearch features RUN -o FILE`` end to end on BSA1's MS1 (NumPy), and one clear line for bad input."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from tests.integration.test_cli import bsa_index, one_line_error, run_cli  # noqa: F401  (a fixture)

COLUMNS = ["mz", "charge", "isotopes", "rt_apex", "rt_start", "rt_end", "fwhm", "area", "apex_intensity", "quality"]


def test_bsa1_features_tsv_and_parquet(tmp_path: Path, data: Path) -> None:
    run = data / "bsa-orbitrapxl" / "BSA1.mzML.gz"
    out = tmp_path / "bsa1.tsv"
    proc = run_cli("features", str(run), "-o", str(out), "--backend", "numpy")
    assert proc.returncode == 0, proc.stderr
    assert "features" in proc.stdout and "564 MS1 scans" in proc.stdout and "scans skipped: none" in proc.stdout
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert list(rows[0]) == COLUMNS and len(rows) > 3000
    charge = [int(r["charge"]) for r in rows]
    assert sum(c == 2 for c in charge) > 600 and all(0 <= c <= 6 for c in charge)  # 800 written; OpenMS: 469
    for r in rows[:200]:
        assert float(r["rt_start"]) <= float(r["rt_apex"]) <= float(r["rt_end"]) and float(r["area"]) > 0
    pq = tmp_path / "bsa1.parquet"
    assert run_cli("features", str(run), "-o", str(pq), "--backend", "numpy", "--passes", "2", "--valley", "0.1",
                   "--min-sample-rate", "0").returncode == 0  # fmt: skip
    import pyarrow.parquet as parquet

    assert parquet.read_table(pq).num_rows > 1.5 * len(rows)  # every dip a tenth deep cuts, sparse signals count
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
    for flag, value in (("--valley", "1.5"), ("--min-sample-rate", "nan")):
        assert flag in one_line_error(run_cli("features", str(ms2_only), "-o", out, flag, value))


def test_search_adds_ms1_elution_of_identified_precursors(tmp_path: Path, data: Path, bsa_index: Path) -> None:  # noqa: F811
    run = data / "bsa-orbitrapxl" / "BSA1.mzML.gz"
    out = tmp_path / "bsa1.tsv"
    proc = run_cli("search", str(run), "--index", str(bsa_index), "-o", str(out), "--backend", "numpy", "--ms1")
    assert proc.returncode == 0, proc.stderr
    # the time printed is the whole of it, the MS1 tracing included and said apart (it is most of it)
    m = re.search(r", ([\d.]+) s \(search ([\d.]+) s, [\d,]+ spectra/s; MS1 elution ([\d.]+) s\)", proc.stdout)
    assert m, proc.stdout
    total, search, ms1 = map(float, m.groups())
    assert total == pytest.approx(search + ms1, abs=0.11) and ms1 > 0
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert list(rows[0])[-2:] == ["ms1_apex_rt", "ms1_area"]
    ident = [r for r in rows if r["q_value"] and float(r["q_value"]) <= 0.05 and r["is_decoy"] == "false"]
    with_ms1 = [r for r in ident if r["ms1_area"] not in ("", "nan")]
    assert len(ident) >= 30 and len(with_ms1) >= 0.9 * len(ident)
    # an apex where the run saw one: BSA1's last identified precursors were still rising when it stopped
    late = [r for r in with_ms1 if r["ms1_apex_rt"] in ("", "nan")]
    first, last = min(int(x["scan"]) for x in rows), max(int(x["scan"]) for x in rows)
    assert late and all(int(r["scan"]) > first + 0.9 * (last - first) for r in late), late
    from rtsearch.io.spectra import read_spectra

    ms2_rt = {s.scan: s.rt for s in read_spectra(run)}
    gap = [abs(float(r["ms1_apex_rt"]) - ms2_rt[int(r["scan"])]) for r in with_ms1 if r not in late]
    assert sorted(gap)[len(gap) // 2] < 30 and max(gap) < 300  # MS2 mostly near the apex; some in long tails
    assert all(float(r["ms1_area"]) > 0 for r in with_ms1)
    unmatched = [r for r in rows if not r["peptide"]]
    assert all(r["ms1_apex_rt"] in ("", "nan") for r in unmatched)
