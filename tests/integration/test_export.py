"""rtsearch's results read by the field's tools: the psm_utils TSV, the Percolator PIN and the mzIdentML that
`rtsearch export` writes from a real run's results (TSV and Parquet) are read back by psm_utils (in the interop
environment scripts/test makes) and the mzIdentML by pyteomics and pyOpenMS too; every matched spectrum's peptide,
charge, decoy flag, score, q-value, retention time and proteins agree with the TSV; with ``--ranks 3`` every rank is
written and read back, and the best matches are those of a one-rank search. The mzIdentML is valid against the
mzIdentML 1.2.0 schema and says how the run was searched (enzyme, modifications with their Unimod accessions,
tolerances, the FASTA file and its decoy rule, the spectrum file, its format and native ids), and where each peptide
is in its protein."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import pytest
from lxml import etree
from pyteomics import mzid

from rtsearch.cli import main

ROOT = Path(__file__).resolve().parents[2]
INTEROP = ROOT / ".venv-interop" / "bin" / "python"


@pytest.fixture(scope="module")
def results(data, demo_index, tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("export")
    run = data / "ecoli-small/Ecoli_MS2_small.mzML"
    out = {"tsv": tmp / "r.tsv", "parquet": tmp / "r.parquet"}
    for path in out.values():
        assert main(["search", str(run), "--index", str(demo_index.folder), "-o", str(path)]) == 0
    return out


def _rows(path: Path, key: str = "spectrum_id") -> dict[str, dict[str, str]]:
    """The matched rows of a results file (their best matches), by their native id (or ``scan=N``)."""
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["peptide"] and r["rank"] == "1"]
    return {r["spectrum_id"] if key == "spectrum_id" else f"scan={r['scan']}": r for r in rows}


def _psm_utils(filetype: str, path: Path) -> list[dict]:
    assert INTEROP.exists(), "the interop environment is missing: scripts/test makes it (.venv-interop, psm_utils)"
    res = subprocess.run([str(INTEROP), str(ROOT / "tests/interop/read_psms.py"), filetype, str(path)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def _same(psms: list[dict], rows: dict[str, dict[str, str]], *, spectrum_id, score: str, qvalue: bool) -> None:
    assert len(psms) == len(rows) > 100
    for p in psms:
        r = rows[spectrum_id(p)]
        assert p["proforma"] == f"{r['peptide']}/{r['charge']}" and p["charge"] == int(r["charge"])
        assert p["is_decoy"] == (r["is_decoy"] == "true")
        assert p["score"] == pytest.approx(float(r[score]), rel=1e-12)
        assert not qvalue or p["qvalue"] == pytest.approx(float(r["q_value"]), rel=1e-12, abs=1e-15)
        assert p["rt"] == pytest.approx(float(r["rt"]), rel=1e-12) and p["proteins"] == r["proteins"].split(";")


@pytest.mark.parametrize("source", ["tsv", "parquet"])
def test_psm_utils_reads_the_psm_utils_table(results, tmp_path, source) -> None:
    out = tmp_path / "r.psm_utils.tsv"
    assert main(["export", str(results[source]), "--to", "psm_utils", "-o", str(out)]) == 0
    psms = _psm_utils("tsv", out)
    rows = _rows(results["tsv"])
    _same(psms, rows, spectrum_id=lambda p: p["spectrum_id"], score="score", qvalue=True)
    assert all(p["run"] == "Ecoli_MS2_small" and p["features"] >= 20 for p in psms)
    assert all(p["spectrum_id"].startswith("controllerType=0 controllerNumber=1 scan=") for p in psms)  # mzML ids
    assert all(p["pep"] == pytest.approx(float(rows[p["spectrum_id"]]["pep"]), abs=1e-15) for p in psms)


def test_a_percolator_reader_reads_the_pin(results, tmp_path) -> None:
    out = tmp_path / "r.pin"
    assert main(["export", str(results["tsv"]), "--to", "pin", "-o", str(out)]) == 0
    psms = _psm_utils("percolator", out)
    _same(psms, _rows(results["tsv"], "scan"), spectrum_id=lambda p: "scan=" + p["spectrum_id"].split("_")[-3],
          score="hyperscore", qvalue=False)  # fmt: skip
    header = out.read_text().split("\n", 1)[0].split("\t")
    assert header[:5] == ["SpecId", "Label", "ScanNr", "ExpMass", "CalcMass"] and header[-2:] == ["Peptide", "Proteins"]


def test_pyteomics_and_psm_utils_read_the_mzidentml(results, tmp_path) -> None:
    out = tmp_path / "r.mzid"
    assert main(["export", str(results["tsv"]), "--to", "mzid", "-o", str(out)]) == 0
    # psm_utils names a spectrum by its title, pyteomics by its spectrumID: both the mzML's own id
    _same(_psm_utils("mzid", out), _rows(results["tsv"]), spectrum_id=lambda p: p["spectrum_id"], score="score",
          qvalue=True)  # fmt: skip
    rows = _rows(results["tsv"])
    seen = 0
    with mzid.MzIdentML(str(out), retrieve_refs=True) as reader:
        for sir in reader:
            r = rows[sir["spectrumID"]]
            (sii,) = sir["SpectrumIdentificationItem"]
            assert sir["spectrum title"] == r["spectrum_id"]
            assert sii["chargeState"] == int(r["charge"]) and sii["rank"] == 1
            assert sii["PSM-level q-value"] == pytest.approx(float(r["q_value"]), abs=1e-15)
            assert sii["PSM-level local FDR"] == pytest.approx(float(r["pep"]), abs=1e-15)
            assert sii["distinct peptide-level q-value"] == pytest.approx(float(r["peptide_q_value"]), abs=1e-15)
            assert sii["experimentalMassToCharge"] == pytest.approx(float(r["precursor_mz"]))
            assert sii["PeptideSequence"] == re.sub(r"\[[^\]]*\]-?|-\[[^\]]*\]", "", r["peptide"])
            assert {e["accession"] for e in sii["PeptideEvidenceRef"]} == set(r["proteins"].split(";"))
            seen += 1
    assert seen == len(rows)


def test_the_results_say_what_produced_them(results, demo_index, data) -> None:
    import hashlib

    import pyarrow.parquet as pq

    from rtsearch import __version__

    run = data / "ecoli-small/Ecoli_MS2_small.mzML"
    for path in results.values():
        rec = json.loads(Path(f"{path}.provenance.json").read_text())
        assert rec["rtsearch"] == __version__ and rec["command"][-2:] == ["-o", str(path)]
        assert rec["inputs"] == [{"path": str(run.resolve()), "bytes": run.stat().st_size,
                                  "sha256": hashlib.sha256(run.read_bytes()).hexdigest()}]  # fmt: skip
        manifest = Path(demo_index.folder) / "manifest.json"
        assert rec["target"]["manifest_sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
        assert rec["config"]["search"]["precursor_tolerance"] and rec["config"]["database"]["enzyme"] == "trypsin"
    meta = pq.read_schema(results["parquet"]).metadata
    assert json.loads(meta[b"rtsearch.provenance"]) == json.loads(Path(f"{results['parquet']}.provenance.json")
                                                                   .read_text())  # fmt: skip


def test_every_rank_is_written_and_read_back(data, demo_index, results, tmp_path) -> None:
    ranked = tmp_path / "ranked.tsv"
    run = data / "ecoli-small/Ecoli_MS2_small.mzML"
    assert main(["search", str(run), "--index", str(demo_index.folder), "-o", str(ranked), "--ranks", "3"]) == 0
    with open(ranked, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    with open(results["tsv"], newline="") as fh:
        one = list(csv.DictReader(fh, delimiter="\t"))
    assert [r for r in rows if r["rank"] == "1"] == one  # the best matches, their scores and q-values unchanged
    best = {r["spectrum_id"]: r for r in one}
    lower = [r for r in rows if r["rank"] != "1"]
    assert {r["rank"] for r in lower} == {"2", "3"} and len(lower) > len(_rows(ranked))
    for r in lower:
        assert r["peptide"] and r["peptide"] != best[r["spectrum_id"]]["peptide"] and r["score"]
        assert r["q_value"] == r["pep"] == r["peptide_q_value"] == ""  # FDR is over the best matches
        assert float(r["hyperscore"]) <= float(best[r["spectrum_id"]]["hyperscore"])
    # a spectrum's ranks follow it, in order
    order = [(r["spectrum_id"], int(r["rank"])) for r in rows]
    assert all(a[0] != b[0] or b[1] == a[1] + 1 for a, b in zip(order, order[1:], strict=False))
    out = tmp_path / "ranked.psm_utils.tsv"
    assert main(["export", str(ranked), "--to", "psm_utils", "-o", str(out)]) == 0
    psms = _psm_utils("tsv", out)
    assert sorted(p["rank"] for p in psms) == sorted(int(r["rank"]) for r in rows if r["peptide"])
    assert all(p["qvalue"] is None for p in psms if p["rank"] > 1)
    out = tmp_path / "ranked.mzid"
    assert main(["export", str(ranked), "--to", "mzid", "-o", str(out)]) == 0
    with mzid.MzIdentML(str(out), retrieve_refs=True) as reader:
        items = {sir["spectrum title"]: sir["SpectrumIdentificationItem"] for sir in reader}
    assert len(items) == len(best) - sum(not r["peptide"] for r in one)
    for sid, sii in items.items():
        assert [i["rank"] for i in sii] == list(range(1, len(sii) + 1))
        assert sii[0]["PSM-level q-value"] == pytest.approx(float(best[sid]["q_value"]), abs=1e-15)
        assert all("PSM-level q-value" not in i for i in sii[1:])


def _schema() -> etree.XMLSchema:
    """psims' copy of the PSI's mzIdentML 1.2.0 schema."""
    import psims

    return etree.XMLSchema(etree.parse(str(Path(psims.__file__).parent / "validation" / "xsd" / "mzIdentML1.2.0.xsd")))


def schema_valid(path: Path) -> etree._ElementTree:
    doc = etree.parse(str(path))
    schema = _schema()
    assert schema.validate(doc), [f"{e.line}: {e.message}" for e in list(schema.error_log)[:5]]
    return doc


def _one(doc: etree._ElementTree, xpath: str) -> etree._Element:
    (el,) = doc.xpath(xpath, namespaces={"m": "http://psidev.info/psi/pi/mzIdentML/1.2"})
    return el


def test_the_mzidentml_is_schema_valid_and_says_how_it_was_searched(results, demo_index, tmp_path) -> None:
    from rtsearch.database.fasta import read_fasta

    out = tmp_path / "r.mzid"
    assert main(["export", str(results["parquet"]), "--to", "mzid", "-o", str(out)]) == 0
    doc = schema_valid(out)
    protocol = "//m:SpectrumIdentificationProtocol"
    assert _one(doc, f"{protocol}//m:EnzymeName/m:cvParam").get("accession") == "MS:1001251"  # Trypsin
    assert _one(doc, f"{protocol}//m:Enzyme").get("missedCleavages") == "2"
    fixed = _one(doc, f"{protocol}//m:SearchModification[@fixedMod='true']")
    assert (fixed.get("residues"), fixed[0].get("accession")) == ("C", "UNIMOD:4")
    variable = _one(doc, f"{protocol}//m:SearchModification[@fixedMod='false']")
    assert (variable.get("residues"), variable[0].get("accession")) == ("M", "UNIMOD:35")
    parent = _one(doc, f"{protocol}/m:ParentTolerance/m:cvParam[@name='search tolerance plus value']")
    assert (parent.get("value"), parent.get("unitName")) == ("20.0", "parts per million")
    fragment = _one(doc, f"{protocol}/m:FragmentTolerance/m:cvParam[@name='search tolerance plus value']")
    assert (fragment.get("value"), fragment.get("unitName")) == ("0.5", "dalton")
    fasta = Path(json.loads((Path(demo_index.folder) / "manifest.json").read_text())["inputs"][0]["path"])
    database = _one(doc, "//m:SearchDatabase")
    assert database.get("location") == str(fasta) and _one(doc, "//m:SearchDatabase/m:FileFormat/m:cvParam").get(
        "name") == "FASTA format"  # fmt: skip
    assert _one(doc, "//m:SearchDatabase/m:cvParam[@name='decoy DB accession regexp']").get("value") == "^rev_"
    spectra = _one(doc, "//m:SpectraData")
    assert spectra.get("location").endswith("Ecoli_MS2_small.mzML")
    assert _one(doc, "//m:SpectraData/m:FileFormat/m:cvParam").get("name") == "mzML format"
    # what the mzML's header declares (its ids do not follow it, but the file says so)
    assert _one(doc, "//m:SpectraData/m:SpectrumIDFormat/m:cvParam").get("accession") == "MS:1000777"
    # every PeptideEvidence where its peptide is in its protein (a decoy where its target is)
    proteins = {p.accession: p.sequence for p in read_fasta(fasta)}
    peptides = {p.get("id"): "".join(p.xpath("m:PeptideSequence/text()", namespaces={"m": doc.getroot().nsmap[None]}))
                for p in doc.xpath("//m:Peptide", namespaces={"m": doc.getroot().nsmap[None]})}  # fmt: skip
    accession = {d.get("id"): d.get("accession") for d in doc.xpath("//m:DBSequence", namespaces={
        "m": doc.getroot().nsmap[None]})}  # fmt: skip
    evidence = doc.xpath("//m:PeptideEvidence", namespaces={"m": doc.getroot().nsmap[None]})
    decoys = 0
    for e in evidence:
        seq, acc = peptides[e.get("peptide_ref")], accession[e.get("dBSequence_ref")]
        start, end = int(e.get("start")), int(e.get("end"))
        if e.get("isDecoy") == "true":
            decoys += 1
            seq, acc = seq[-2::-1] + seq[-1], acc.removeprefix("rev_")
        protein = proteins[acc]
        assert protein[start - 1 : end] == seq, (acc, seq, start, end)
        assert e.get("pre") == (protein[start - 2] if start > 1 else "-")
        assert e.get("post") == (protein[end] if end < len(protein) else "-")
    assert len(evidence) > 100 and decoys > 10


def test_an_mgf_run_is_named_by_index_and_every_rank_is_valid(data, demo_index, tmp_path) -> None:
    from pyteomics import mgf

    entries = (data / "iprg2013-f13" / "F13.mgf").read_text().split("END IONS\n")[:150]
    run = tmp_path / "F13_head.mgf"
    run.write_text("END IONS\n".join(entries) + "END IONS\n")
    results = tmp_path / "r.tsv"
    assert main(["search", str(run), "--index", str(demo_index.folder), "-o", str(results), "--ranks", "2"]) == 0
    out = tmp_path / "r.mzid"
    assert main(["export", str(results), "--to", "mzid", "-o", str(out)]) == 0
    doc = schema_valid(out)
    assert _one(doc, "//m:SpectraData/m:FileFormat/m:cvParam").get("name") == "Mascot MGF format"
    assert _one(doc, "//m:SpectraData/m:SpectrumIDFormat/m:cvParam").get("accession") == "MS:1000774"
    titles = [s["params"]["title"] for s in mgf.read(str(run))]
    with mzid.MzIdentML(str(out), retrieve_refs=False) as reader:
        named = [(sir["spectrumID"], sir["spectrum title"]) for sir in reader]
    assert len(named) > 20  # a human run against E. coli: its matches are chance ones, but named all the same
    for spectrum_id, title in named:  # index=N: the N-th entry of the file, from 0
        assert spectrum_id.startswith("index=") and titles[int(spectrum_id[6:])] == title


def test_a_results_file_without_its_provenance_still_gives_a_valid_mzidentml(results, tmp_path, caplog) -> None:
    alone = tmp_path / "moved.tsv"
    alone.write_bytes(results["tsv"].read_bytes())
    out = tmp_path / "r.mzid"
    with caplog.at_level("WARNING"):
        assert main(["export", str(alone), "--to", "mzid", "-o", str(out)]) == 0
    assert "no provenance" in caplog.text
    doc = schema_valid(out)
    assert _one(doc, "//m:EnzymeName/m:cvParam").get("name") == "NoEnzyme"
    assert _one(doc, "//m:SpectraData/m:SpectrumIDFormat/m:cvParam").get("name") == "scan number only nativeID format"


def test_openms_reads_the_protocol_and_the_peptide_positions(results, tmp_path) -> None:
    out = tmp_path / "r.mzid"
    assert main(["export", str(results["tsv"]), "--to", "mzid", "-o", str(out)]) == 0
    assert INTEROP.exists(), "the interop environment is missing: scripts/test makes it (.venv-interop, pyopenms)"
    res = subprocess.run([str(INTEROP), str(ROOT / "tests/interop/read_mzid_openms.py"), str(out)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "use results at own risk" not in res.stderr and "PeptideEvidence" not in res.stderr, res.stderr[-3000:]
    got = json.loads(res.stdout)
    assert (got["enzyme"], got["missed_cleavages"]) == ("Trypsin", 2)
    assert (got["precursor_tolerance"], got["precursor_ppm"]) == (20.0, True)
    assert (got["fragment_tolerance"], got["fragment_ppm"]) == (0.5, False)
    assert got["fixed"] == ["Carbamidomethyl (C)"] and got["variable"] == ["Oxidation (M)"]
    assert got["db"].endswith("ecoli.fasta")
    rows = _rows(results["tsv"])
    assert len(got["hits"]) == len(rows)
    for hit in got["hits"]:
        assert hit["evidence"] and all(e["start"] > 0 and e["end"] >= e["start"] + 6 for e in hit["evidence"])
