"""BSA1 against the NIST BSA consensus library (with its shuffled decoys) vs rtsearch's own database search.

The issue's floor: PSMs at 1 % FDR from library search at least those of rtsearch's database
search of the same run (counted the same way: top-1 per spectrum, target-decoy on the score, decoys / targets as
the peers were counted: under the reported (decoys + 1) / targets this run holds no list at 1 %).
"""

from __future__ import annotations

import csv

import numpy as np
import pytest

from rtsearch.cli import main
from rtsearch.io.spectra import read_spectra
from rtsearch.library.store import import_library, load_library
from rtsearch.scoring.library.scores import score_library
from rtsearch.search.fdr import count_at, q_values
from rtsearch.types import Tolerance
from tests.devruns import DEV_RUNS
from tests.integration.test_dev_runs import _toml, peers_count, recount
from tests.integration.test_export import schema_valid


@pytest.mark.slow
def test_bsa1_library_search_reaches_the_database_search(data, dev_indexes, tmp_path, capsys):
    dev = next(d for d in DEV_RUNS if d.name == "BSA1")
    _, run = dev.paths(data)
    out = tmp_path / "db.tsv"
    assert main(["search", str(run), "--index", str(dev_indexes[dev.fastas]), "--config",
                 str(_toml(dev, tmp_path / "s.toml")), "--backend", "numpy", "-o", str(out)]) == 0  # fmt: skip
    with open(out, newline="") as fh:
        database = peers_count(list(csv.DictReader(fh, delimiter="\t")))
    import_library([data / "spectral-libraries/nist-bsa_consensus.msp"], tmp_path / "lib")
    lib = load_library(tmp_path / "lib")
    spectra = [s for s in read_spectra(run) if s.ms_level == 2]
    m = score_library(lib, spectra, Tolerance.parse(dev.precursor))
    hit = m.entry >= 0
    decoy = np.zeros(len(spectra), bool)
    decoy[hit] = lib.decoy[m.entry[hit]]
    by_f = count_at(q_values(np.where(hit, m.f_value, np.nan), decoy, plus_one=False), decoy)
    # the CLI: features -> discriminant -> q-values, recounted from the file's score and is_decoy
    lib_out = tmp_path / "lib.tsv"
    assert main(["search", str(run), "--library", str(tmp_path / "lib"), "--config", str(tmp_path / "s.toml"),
                 "-o", str(lib_out)]) == 0  # fmt: skip
    with open(lib_out, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    library = peers_count(rows)
    q, _, q_file = recount(rows, plus_one=True)
    with capsys.disabled():
        print(f"\nBSA1: library search {library} PSMs at 1% FDR (F-value alone {by_f}), database search {database}")
    assert library >= database > 0 and by_f >= database
    np.testing.assert_allclose(q_file, q, atol=1e-5)
    assert len(rows) == len(spectra) and {"library_id", "dot", "dot_bias", "delta_dot", "f_value"} <= rows[0].keys()
    header = lib_out.read_text().split("\n", 1)[0].split("\t")
    assert len(header) == len(set(header))  # "dot" is filled by the library's, not written twice
    # the best-scoring targets are BSA peptides the library holds
    best = np.argsort(-np.where(hit & ~decoy, m.f_value, -np.inf))[:5]
    assert all(lib.proteins[m.entry[i]].startswith("sp|P02769|ALBU_BOVIN") for i in best)


def test_a_library_built_from_our_identifications_finds_them_again(data, demo_index, tmp_path, capsys):
    run = data / "ecoli-small/Ecoli_MS2_small.mzML"
    db, msp, lib_dir, lib_out = tmp_path / "db.tsv", tmp_path / "own.msp", tmp_path / "own.lib", tmp_path / "lib.tsv"
    assert main(["search", str(run), "--index", str(demo_index.folder), "-o", str(db)]) == 0
    # 139 spectra: no list at 1 % under (decoys + 1) / targets, so the library takes the PSMs at 5 %
    assert main(["library", "build", str(db), str(run), "--out", str(msp), "--peak-tolerance", "0.5",
                 "--max-q", "0.05"]) == 0  # fmt: skip
    # the same library from the same results written as Parquet (a daemon's results_format = "parquet")
    assert main(["search", str(run), "--index", str(demo_index.folder), "-o", str(tmp_path / "db.parquet")]) == 0
    assert main(["library", "build", str(tmp_path / "db.parquet"), str(run), "--out", str(tmp_path / "pq.msp"),
                 "--peak-tolerance", "0.5", "--max-q", "0.05"]) == 0  # fmt: skip
    assert (tmp_path / "pq.msp").read_text() == msp.read_text()
    assert main(["library", "import", str(msp), "--out", str(lib_dir)]) == 0
    assert main(["search", str(run), "--library", str(lib_dir), "-o", str(lib_out)]) == 0
    with open(db, newline="") as fh:
        ident = {r["scan"]: r["peptide"] for r in csv.DictReader(fh, delimiter="\t")
                 if r["q_value"] and float(r["q_value"]) <= 0.05 and r["is_decoy"] == "false"}  # fmt: skip
    with open(lib_out, newline="") as fh:
        found = {r["scan"]: r["peptide"] for r in csv.DictReader(fh, delimiter="\t")}
    same = sum(found[s] == p for s, p in ident.items())
    with capsys.disabled():
        print(f"\nEcoli_MS2_small: own library gives the same peptide for {same} of {len(ident)} identified spectra")
    assert len(ident) >= 85 and same >= 0.9 * len(ident)
    # its mzIdentML: a spectral library search of the MSP it was imported from
    assert main(["export", str(lib_out), "--to", "mzid", "-o", str(tmp_path / "lib.mzid")]) == 0
    doc = schema_valid(tmp_path / "lib.mzid")
    ns = {"m": "http://psidev.info/psi/pi/mzIdentML/1.2"}
    assert doc.xpath("//m:SearchType/m:cvParam/@name", namespaces=ns) == ["spectral library search"]
    assert doc.xpath("//m:SearchDatabase/@location", namespaces=ns) == [str(msp.resolve())]
    assert doc.xpath("//m:SearchDatabase/m:FileFormat/m:cvParam/@name", namespaces=ns) == ["NIST MSP format"]


def test_open_modification_library_search(data, tmp_path):
    run = data / "bsa-orbitrapxl/BSA1.mzML.gz"
    import_library([data / "spectral-libraries/nist-bsa_consensus.msp"], tmp_path / "lib")
    counts = {}
    for mode in ("narrow", "open"):
        out = tmp_path / f"{mode}.tsv"
        assert main(["search", str(run), "--library", str(tmp_path / "lib"), "-o", str(out),
                     *(["--open"] if mode == "open" else [])]) == 0  # fmt: skip
        with open(out, newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        counts[mode] = peers_count(rows)
        ident = [r for r in rows if r["q_value"] and float(r["q_value"]) <= 0.05 and r["is_decoy"] == "false"]
        shifts = [abs(float(r["precursor_mz"]) - float(r["calc_mz"])) for r in ident]
        if mode == "open":
            # identifications whose precursor is far from the library entry's: modified or other charge states
            assert sum(s > 1.0 for s in shifts) > 10
        else:  # within 20 ppm of the entry's m/z or of its first 13C peak (isotope errors 0 and 1)
            off = [min(s, abs(s - 1.0033548 / int(r["charge"]))) for s, r in zip(shifts, ident, strict=True)]
            assert max(off) < 0.05
    assert counts["open"] >= counts["narrow"] > 0
    assert main(["search", str(run), "--index", str(tmp_path), "--open", "-o", str(tmp_path / "x.tsv")]) == 2
