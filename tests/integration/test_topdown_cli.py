"""``rtsearch search RUN.msalign --proteoforms DIR`` end to end on real files (NumPy, whole N-terminal forms, so
that it runs in seconds), and one clear line for bad top-down input."""

from __future__ import annotations

import csv
import dataclasses
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.integration.test_cli import one_line_error, run_cli
from tests.integration.test_export import schema_valid

FLASHAPP = "topdown-flashapp-ecoli"


@pytest.fixture(scope="module")
def ecoli_pf(tmp_path_factory, data) -> Path:
    out = tmp_path_factory.mktemp("pf") / "ecoli.pf"
    fasta = data / FLASHAPP / "example_database.fasta"
    proc = run_cli("proteoforms", "build", "--fasta", str(fasta), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("cfg") / "topdown.toml"
    p.write_text("[topdown]\ntruncations = false\ntolerance_da = 0.05\n")
    return p


def _slice(src: Path, dst: Path, entries: int) -> Path:
    """The first ``entries`` spectra of an msalign file (its header lines kept)."""
    text = src.read_text()
    cut = 0
    for _ in range(entries):
        cut = text.index("END IONS", cut) + len("END IONS\n")
    dst.write_text(text[:cut])
    return dst


def test_an_msalign_run_is_searched_with_proteoform_columns(ecoli_pf, config, data, tmp_path) -> None:
    run = _slice(data / FLASHAPP / "toppic_ms2.msalign", tmp_path / "flash_ms2.msalign", 12)
    out = tmp_path / "prsms.tsv"
    proc = run_cli("search", str(run), "--proteoforms", str(ecoli_pf), "--config", str(config), "--backend", "numpy",
                   "-o", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "12 spectra" in proc.stdout and "PrSMs and" in proc.stdout and "proteoforms at 1% FDR" in proc.stdout
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert len(rows) == 12 and {r["run"] for r in rows} == {"flash"}
    assert [int(r["scan"]) for r in rows][:3] == [3099, 3100, 3101]
    for r in rows:
        assert r["proteins"] and float(r["evalue"]) > 0 and 0 <= float(r["q_value"]) <= 1
        start, end = int(r["proteoform_start"]), int(r["proteoform_end"])
        plain = re.sub(r"\[[^]]*\]-?\??|[()]", "", r["peptide"])
        assert 1 <= start <= end and plain.isalpha() and len(plain) == end - start + 1
        shifted = r["unknown_shifts"] != "0" or r["known_shifts"] != "0"
        assert shifted == ("[" in r["peptide"].replace("[Acetyl]-", ""))  # shifts in ProForma
        assert abs(float(r["mass_shift"])) <= 500.1
    # its mzIdentML: each proteoform where the results place it, the protocol top-down's
    assert run_cli("export", str(out), "--to", "mzid", "-o", str(tmp_path / "prsms.mzid")).returncode == 0
    doc = schema_valid(tmp_path / "prsms.mzid")
    ns = {"m": "http://psidev.info/psi/pi/mzIdentML/1.2"}
    assert doc.xpath("//m:EnzymeName/m:cvParam/@name", namespaces=ns) == ["no cleavage"]
    assert doc.xpath("//m:SpectraData/m:FileFormat/m:cvParam/@name", namespaces=ns) == ["msalign format"]
    spans = {(r["proteins"], int(r["proteoform_start"]), int(r["proteoform_end"])) for r in rows}
    accession = {d.get("id"): d.get("accession") for d in doc.xpath("//m:DBSequence", namespaces=ns)}
    placed = {(accession[e.get("dBSequence_ref")], int(e.get("start")), int(e.get("end")))
              for e in doc.xpath("//m:PeptideEvidence", namespaces=ns)}  # fmt: skip
    assert placed == spans


def test_bad_top_down_input_is_one_clear_line(ecoli_pf, config, data, tmp_path) -> None:
    whole = (data / FLASHAPP / "toppic_ms2.msalign").read_text()
    cut = tmp_path / "cut_ms2.msalign"
    cut.write_text(whole[: whole.index("END IONS", 5000)])  # ends inside an entry
    # the entries before the cut are searched first: whole N-terminal forms keep that to seconds (truncations, the
    # default, took 90 s of the 2-core development machine for the same line)
    line = one_line_error(run_cli("search", str(cut), "--proteoforms", str(ecoli_pf), "--config", str(config), "-o",
                                  str(tmp_path / "o.tsv")))  # fmt: skip
    assert str(cut) in line and "line" in line
    line = one_line_error(run_cli("search", str(cut), "--proteoforms", str(tmp_path / "none.pf"), "-o",
                                  str(tmp_path / "o.tsv")))  # fmt: skip
    assert "proteoform database" in line
    bad = tmp_path / "bad.toml"
    bad.write_text("[topdown]\nmax_shifts = 5\n")
    line = one_line_error(run_cli("search", str(cut), "--proteoforms", str(ecoli_pf), "--config", str(bad), "-o",
                                  str(tmp_path / "o.tsv")))  # fmt: skip
    assert "max_shifts" in line


def test_spectra_without_a_usable_precursor_are_answered_with_a_reason(ecoli_pf, config, data, tmp_path) -> None:
    text = _slice(data / FLASHAPP / "toppic_ms2.msalign", tmp_path / "two.msalign", 2).read_text()
    first = text.index("PRECURSOR_MASS=")
    text = text[:first] + "PRECURSOR_MASS=0" + text[text.index("\n", first) :]
    run = tmp_path / "noprec_ms2.msalign"
    run.write_text(text)
    out = tmp_path / "r.tsv"
    proc = run_cli("search", str(run), "--proteoforms", str(ecoli_pf), "--config", str(config), "--backend", "numpy",
                   "-o", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert len(rows) == 2 and "precursor" in rows[0]["reason"] and not rows[0]["proteins"] and rows[1]["proteins"]


def test_a_topfd_run_of_another_organism_searches_end_to_end(ecoli_pf, config, data, tmp_path) -> None:
    """The Jurkat run (TopFD 1.6 layout, HCD, human: no database here) against the E. coli proteoforms: read,
    searched and written whole — for format, not identifications."""
    run = _slice(data / "topdown-jurkat" / "JurkatTopDownRep2Fract1_ms2.msalign", tmp_path / "jurkat_ms2.msalign", 15)
    out = tmp_path / "jurkat.tsv"
    proc = run_cli("search", str(run), "--proteoforms", str(ecoli_pf), "--config", str(config), "--backend", "numpy",
                   "-o", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert len(rows) == 15 and {r["run"] for r in rows} == {"jurkat"}
    answered = [r for r in rows if r["proteins"]]
    unanswered = [r for r in rows if not r["proteins"]]
    assert answered and all(r["reason"] for r in unanswered)  # no precursor mass in TopFD's file, or none aligned


def test_on_the_cpu_progress_is_per_spectrum_and_the_answers_those_of_one_batch(ecoli_pf, data, tmp_path) -> None:
    from rtsearch.config import load_config
    from rtsearch.scoring.backend import get_backend
    from rtsearch.search.offline import search_runs
    from rtsearch.search.topdown import TopDownTarget

    run = _slice(data / FLASHAPP / "toppic_ms2.msalign", tmp_path / "flash_ms2.msalign", 12)
    cfg = load_config(None).topdown
    target = TopDownTarget.open(ecoli_pf, dataclasses.replace(cfg, truncations=False), get_backend("numpy"))
    seen: list[int] = []
    table, _ = search_runs([run], target, progress=lambda done, total: seen.append(done))
    assert seen == list(range(1, 13))  # a spectrum at a time: the bar moves, Ctrl-C is heard between spectra

    class OneBatch(TopDownTarget):
        batch_limit = None

    whole, _ = search_runs([run], OneBatch.open(ecoli_pf, target.cfg, get_backend("numpy")))
    ours, theirs = table.columns(), whole.columns()
    assert ours.keys() == theirs.keys()
    for name, column in ours.items():
        np.testing.assert_array_equal(np.asarray(column), np.asarray(theirs[name]), err_msg=name)


def test_on_the_cpu_engine_processes_score_side_by_side_with_the_same_answers(ecoli_pf, config, data,
                                                                              tmp_path) -> None:  # fmt: skip
    """``--processes 2``: two engine processes score the spectra (the log says so), and the results file is the one
    this process alone writes; ``--processes`` where it does not apply, one clear line."""
    run = _slice(data / FLASHAPP / "toppic_ms2.msalign", tmp_path / "flash_ms2.msalign", 12)
    rows = {}
    for n in (1, 2):
        out = tmp_path / f"p{n}.tsv"
        proc = run_cli("-v", "search", str(run), "--proteoforms", str(ecoli_pf), "--config", str(config), "--backend",
                       "numpy", "--processes", str(n), "-o", str(out))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert ("2 engine processes started" in proc.stderr) == (n == 2), proc.stderr
        rows[n] = out.read_text()
    assert rows[1] == rows[2] and rows[1].count("\n") == 13
    line = one_line_error(run_cli("search", str(run), "--proteoforms", str(ecoli_pf), "--backend", "numpy",
                                  "--processes", "0", "-o", str(tmp_path / "o.tsv")))  # fmt: skip
    assert "--processes" in line


def test_ctrl_c_stops_a_cpu_top_down_search_at_once(ecoli_pf, data, tmp_path) -> None:
    """The whole FLASHApp run with truncated forms on the CPU takes many minutes; the first Ctrl-C ends it, one line,
    exit 130, without waiting for the spectrum being scored (it waited for the whole file: issue 72)."""
    run = data / FLASHAPP / "toppic_ms2.msalign"
    proc = subprocess.Popen([sys.executable, "-m", "rtsearch", "-v", "search", str(run), "--proteoforms", str(ecoli_pf),
                             "--backend", "numpy", "-o", str(tmp_path / "prsms.tsv")],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # scoring has begun once the target says what it searches
            if "searching proteoforms" in line:
                break
        time.sleep(2.0)  # into the first spectra
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)  # generous: it returns at once; before, after the whole file (> 10 minutes)
        rest = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    assert rc == 130, rest
    assert "Traceback" not in rest and [ln for ln in rest.splitlines() if "interrupted" in ln], rest
    assert not (tmp_path / "prsms.tsv").exists()
