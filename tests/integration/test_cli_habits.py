"""What a user's habits expect of the command line (issue 73): ``python -m rtsearch``, outputs checked before any
work, inputs that are cut short, empty or misnamed, and ``--log-format json`` anywhere on the line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from tests.integration.test_cli import bsa_index, one_line_error  # noqa: F401 (a fixture)


def rtsearch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rtsearch", *args], capture_output=True, text=True, timeout=300)


def test_python_dash_m_rtsearch_is_the_command():
    proc = rtsearch("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("rtsearch "), proc
    assert "search" in rtsearch("--help").stdout


def test_an_output_that_cannot_be_written_is_refused_before_the_search(tmp_path, data, bsa_index):  # noqa: F811
    run = str(data / "ecoli-small" / "Ecoli_MS2_small.mzML")
    msg = one_line_error(rtsearch("search", run, "--index", str(bsa_index), "-o", str(tmp_path / "no" / "r.tsv")))
    assert "r.tsv" in msg and "cannot write" in msg and "no folder" in msg
    (tmp_path / "d.tsv").mkdir()
    msg = one_line_error(rtsearch("search", run, "--index", str(bsa_index), "-o", str(tmp_path / "d.tsv")))
    assert "cannot write" in msg and "it is a folder" in msg
    # nothing searched: the run's path is checked after the output's, so a missing run is not what it reports
    msg = one_line_error(rtsearch("search", "missing.mgf", "--index", str(bsa_index), "-o", str(tmp_path / "n/r.tsv")))
    assert "cannot write" in msg


def test_export_refuses_a_folder_and_a_file_that_is_no_results_file(tmp_path, data, bsa_index):  # noqa: F811
    results = tmp_path / "r.tsv"
    run = str(data / "ecoli-small" / "Ecoli_MS2_small.mzML")
    assert rtsearch("search", run, "--index", str(bsa_index), "-o", str(results)).returncode == 0
    assert "it is a folder" in one_line_error(rtsearch("export", str(results), "--to", "pin", "-o", str(tmp_path)))
    # a folder that does not exist yet is made, as before
    made = rtsearch("export", str(results), "--to", "pin", "-o", str(tmp_path / "new" / "r.pin"))
    assert made.returncode == 0 and (tmp_path / "new" / "r.pin").is_file(), made.stderr
    features = tmp_path / "features.tsv"
    features.write_text("mz\tcharge\tapex_rt\tarea\n500.25\t2\t61.5\t1000.0\n")
    msg = one_line_error(rtsearch("export", str(features), "--to", "mzid", "-o", str(tmp_path / "f.mzid")))
    assert "features.tsv" in msg and "not an rtsearch results file" in msg and "scan" in msg


def test_a_cut_short_gzip_names_the_file(tmp_path, data, bsa_index):  # noqa: F811
    raw = gzip.compress((data / "iprg2013-f13" / "F13.mgf").read_bytes()[:2_000_000])
    cut = tmp_path / "cut.mgf.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    msg = one_line_error(rtsearch("search", str(cut), "--index", str(bsa_index), "-o", str(tmp_path / "r.tsv")))
    assert "cut.mgf.gz" in msg and "truncated" in msg


@pytest.mark.parametrize(("content", "why"), [(None, "an mzML or mzXML file named"), (b"", "the file is empty")])
def test_a_file_with_no_spectrum_says_so(tmp_path, data, bsa_index, content, why):  # noqa: F811
    f = tmp_path / "run.mgf"
    f.write_bytes((data / "ecoli-small" / "Ecoli_MS2_small.mzML").read_bytes() if content is None else content)
    proc = rtsearch("search", str(f), "--index", str(bsa_index), "-o", str(tmp_path / "r.tsv"))
    assert proc.returncode == 0, proc.stderr
    assert "run.mgf: no spectrum read" in proc.stderr and why in proc.stderr, proc.stderr


def test_json_logs_are_json_to_the_last_line_and_the_flag_goes_anywhere(tmp_path, data, bsa_index):  # noqa: F811
    empty = tmp_path / "empty.mgf"
    empty.write_bytes(b"")
    for args in (("search", str(empty), "--index", str(bsa_index), "-o", str(tmp_path / "r.tsv"), "--log-format",
                  "json"),
                 ("--log-format=json", "search", str(empty), "--index", str(bsa_index), "-o", str(tmp_path / "r.tsv")),
                 ("search", str(empty), "--index", str(tmp_path / "none"), "-o", str(tmp_path / "r.tsv"), "-v",
                  "--log-format", "json"),
                 ("search", "--log-format", "json")):  # fmt: skip
        proc = rtsearch(*args)
        lines = [json.loads(ln) for ln in proc.stderr.splitlines() if ln.strip()]  # each line JSON, or this fails
        assert lines and all({"time", "level", "logger", "message"} <= line.keys() for line in lines), proc.stderr
    assert lines[-1]["level"] == "error" and "required" in lines[-1]["message"] and proc.returncode == 2


def test_help_names_every_format_it_reads(tmp_path):
    assert ".dlib" in rtsearch("library", "import", "--help").stdout
    assert ".elib" in rtsearch("library", "--help").stdout or ".elib" in rtsearch("--help").stdout
    sim = subprocess.run([sys.executable, "-m", "rtsearch_sim.cli", "replay", "--help"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert sim.returncode == 0 and "msalign" in sim.stdout and "mzXML" in sim.stdout, sim.stderr


def test_export_does_not_write_text_into_a_parquet_name(tmp_path):
    results = tmp_path / "r.tsv"
    results.write_text("")  # never read: the name is refused first
    msg = one_line_error(rtsearch("export", str(results), "--to", "psm_utils", "-o", str(tmp_path / "x.parquet")))
    assert "x.parquet" in msg and "not Parquet" in msg and not (tmp_path / "x.parquet").exists()


def test_strict_refuses_a_site_unimod_does_not_list_which_is_otherwise_warned_about(tmp_path, data):
    cfg = tmp_path / "w.toml"
    cfg.write_text('[database]\nvariable_mods = ["Oxidation@M", "Phospho@W"]\n'
                   '[proteoforms]\nknown_ptms = ["Phospho@W"]\n')  # fmt: skip
    fasta = str(data / "bsa-orbitrapxl" / "BSA.fasta")
    for command in ("index", "proteoforms"):
        msg = one_line_error(rtsearch(command, "build", "--fasta", fasta, "--config", str(cfg), "--strict",
                                      "--out", str(tmp_path / command)))  # fmt: skip
        assert "'Phospho@W'" in msg and "not on W" in msg and "--strict" in msg
        assert not (tmp_path / command).exists()  # refused before any work
    built = rtsearch("index", "build", "--fasta", fasta, "--config", str(cfg), "--out", str(tmp_path / "index"))
    assert built.returncode == 0, built.stderr
    assert built.stderr.count("Unimod lists Phospho on C, D, E, H, K, R, S, T, Y, not on W") == 1
