"""The command line on real files: summaries, and one clear line for every kind of bad input."""

from __future__ import annotations

import csv
import gzip
import math
import subprocess
import sys
from pathlib import Path

import pytest

from rtsearch.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rtsearch.cli", *args], capture_output=True, text=True, timeout=300)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def bsa_index(tmp_path_factory, data) -> Path:
    out = tmp_path_factory.mktemp("bsa") / "idx"
    proc = run_cli("index", "build", "--fasta", str(data / "bsa-orbitrapxl" / "BSA.fasta"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "1 proteins" in proc.stdout and "decoy peptides" in proc.stdout and "fragments" in proc.stdout
    return out


def test_fasta_given_twice_reads_both(tmp_path):
    """``--fasta A --fasta B`` is ``--fasta A B`` (argparse's default kept only B: an index silently without A)."""
    a, b = tmp_path / "a.fasta", tmp_path / "b.fasta"
    a.write_text(">A one\nMKWVTFISLLLLFSSAYSRGVFRR\n")
    b.write_text(">B two\nMSDKIIHLTDDSFDTDVLKADGAILVDFWAEWCGPCK\n")
    proc = run_cli("index", "build", "--fasta", str(a), "--fasta", str(b), "--out", str(tmp_path / "i"))
    assert proc.returncode == 0, proc.stderr
    assert "2 proteins" in proc.stdout, proc.stdout


def test_index_info(bsa_index):
    proc = run_cli("index", "info", str(bsa_index))
    assert proc.returncode == 0
    assert "BSA.fasta" in proc.stdout and "missed_cleavages" in proc.stdout


def test_truncated_fasta(tmp_path, data):
    text = (data / "yeast-small" / "small-yeast.fasta").read_text()
    cut = text[: text.index(">", 5000)] + ">sp|TRUNCATED|X_YEAST cut here\n"
    f = tmp_path / "cut.fasta"
    f.write_text(cut)
    msg = one_line_error(run_cli("index", "build", "--fasta", str(f), "--out", str(tmp_path / "i")))
    line = cut.count("\n")  # the header line of the last entry
    assert f"cut.fasta:{line}:" in msg and "no sequence" in msg


def test_invalid_residues(tmp_path):
    f = tmp_path / "bad.fasta"
    f.write_text(">sp|P1|A\nPEPTIDEKPEPTIDER\n>sp|P2|B\nPEPT1DEK\n")
    msg = one_line_error(run_cli("index", "build", "--fasta", str(f), "--out", str(tmp_path / "i")))
    assert "bad.fasta:3:" in msg and "'1'" in msg


def test_corrupt_mzml(tmp_path, data, bsa_index):
    raw = (data / "ecoli-small" / "Ecoli_MS2_small.mzML").read_bytes()
    f = tmp_path / "cut.mzML"
    f.write_bytes(raw[: len(raw) // 2])
    msg = one_line_error(run_cli("search", str(f), "--index", str(bsa_index), "-o", str(tmp_path / "r.tsv")))
    assert "cut.mzML" in msg and "corrupt" in msg.lower()


def test_unscorable_spectra_get_rows_with_reasons(tmp_path, data, bsa_index):
    """MGF entries without PEPMASS, with NaN peaks or without peaks are rows with a reason."""
    text = (data / "iprg2013-f13" / "F13.mgf").read_text()
    entries = text.split("BEGIN IONS")[1:6]
    entries = ["BEGIN IONS" + e[: e.index("END IONS") + 8] + "\n" for e in entries]
    lines = entries[1].splitlines()
    entries[1] = "\n".join(ln for ln in lines if not ln.startswith("PEPMASS")) + "\n"
    lines = entries[2].splitlines()
    peak = next(i for i, ln in enumerate(lines) if ln[:1].isdigit())
    lines[peak] = lines[peak].split()[0] + " nan"
    entries[2] = "\n".join(lines) + "\n"
    lines = entries[3].splitlines()
    entries[3] = "\n".join(ln for ln in lines if not ln[:1].isdigit()) + "\n"
    f = tmp_path / "bad.mgf"
    f.write_text("".join(entries))
    out = tmp_path / "r.tsv"
    proc = run_cli("search", str(f), "--index", str(bsa_index), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == 5
    assert "no PEPMASS" in rows[1]["reason"] and rows[1]["peptide"] == ""
    assert "non-finite" in rows[2]["reason"]
    assert "empty" in rows[3]["reason"]


def test_parquet_output(tmp_path, data, bsa_index):
    import pyarrow.parquet as pq

    out = tmp_path / "r.parquet"
    code = main(["search", str(data / "ecoli-small" / "Ecoli_MS2_small.mzML"), "--index", str(bsa_index),
                 "--backend", "numpy", "-o", str(out)])
    assert code == 0
    table = pq.read_table(out)
    assert table.num_rows == 139
    assert table.column_names[:18] == ["run", "scan", "spectrum_id", "rank", "charge", "precursor_mz", "rt", "calc_mz",
                                       "ppm_error", "peptide", "proteins", "is_decoy", "score", "q_value",
                                       "peptide_q_value", "pep", "matched_peaks", "reason"]
    q = [v for v in table.column("q_value").to_pylist() if v is not None]
    assert all(0.0 <= v <= 1.0 and not math.isnan(v) for v in q)


def test_index_built_with_other_parameters_is_refused(tmp_path, data, bsa_index):
    cfg = tmp_path / "mc1.toml"
    cfg.write_text("[database]\nmissed_cleavages = 1\n")
    msg = one_line_error(run_cli("search", str(data / "ecoli-small" / "Ecoli_MS2_small.mzML"), "--index",
                                 str(bsa_index), "--config", str(cfg), "-o", str(tmp_path / "r.tsv")))
    assert "missed_cleavages" in msg and "rebuild" in msg


def test_bad_config_and_missing_files(tmp_path, data, bsa_index):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[search]\nprecursor_tolerance = "twenty"\n')
    run = str(data / "ecoli-small" / "Ecoli_MS2_small.mzML")
    assert "precursor_tolerance" in one_line_error(
        run_cli("search", run, "--index", str(bsa_index), "--config", str(cfg), "-o", str(tmp_path / "r.tsv")))
    assert "not found" in one_line_error(
        run_cli("search", str(tmp_path / "none.mzML"), "--index", str(bsa_index), "-o", str(tmp_path / "r.tsv")))
    assert "not an rtsearch index" in one_line_error(
        run_cli("search", run, "--index", str(tmp_path), "-o", str(tmp_path / "r.tsv")))
    gz = tmp_path / "fake.mzML.gz"
    gz.write_bytes(gzip.compress(b"<mzML>garbage")[:20])
    assert "fake.mzML.gz" in one_line_error(
        run_cli("search", str(gz), "--index", str(bsa_index), "-o", str(tmp_path / "r.tsv")))


def test_every_command_computes_where_the_configuration_says(tmp_path, data, bsa_index):
    """``[search] backend`` is honoured by index build, search (index and library), serve and demo; ``--backend``
    overrides it. Here ``cupy`` is asked for: without a GPU every command says so (one line, exit 2)."""
    from rtsearch.errors import BackendError
    from rtsearch.library.store import import_library
    from rtsearch.scoring.backend import get_backend

    try:
        get_backend("cupy")
        gpu = True
    except BackendError:
        gpu = False
    cfg = tmp_path / "cupy.toml"
    cfg.write_text('[search]\nbackend = "cupy"\n')
    import_library([data / "spectral-libraries/nist-bsa_consensus.msp"], tmp_path / "lib")
    run, out = str(data / "ecoli-small" / "Ecoli_MS2_small.mzML"), str(tmp_path / "r.tsv")
    commands = {
        "index build": ["index", "build", "--fasta", str(data / "bsa-orbitrapxl" / "BSA.fasta"), "--out",
                        str(tmp_path / "idx"), "--config", str(cfg)],
        "search --index": ["search", run, "--index", str(bsa_index), "--config", str(cfg), "-o", out],
        "search --library": ["search", run, "--library", str(tmp_path / "lib"), "--config", str(cfg), "-o", out],
        "serve": ["serve", "--index", str(bsa_index), "--config", str(cfg), "--metrics-port", "0"],
    }  # fmt: skip
    for name, argv in commands.items():
        if gpu and name == "serve":
            continue  # with a GPU, serve would start serving
        proc = run_cli(*argv)
        if gpu:
            assert proc.returncode == 0, (name, proc.stderr)
        else:
            assert "backend 'cupy' requested but CuPy or a CUDA GPU is not available" in one_line_error(proc), name
    # the flag wins over the file
    assert run_cli("search", run, "--index", str(bsa_index), "--config", str(cfg), "--backend", "numpy",
                   "-o", out).returncode == 0  # fmt: skip
    if not gpu:  # the demo reads the bundled configuration; its flag is honoured too
        assert "backend 'cupy'" in one_line_error(run_cli("demo", "--backend", "cupy", "--quiet"))


@pytest.mark.parametrize(("toml", "flags", "key"), [
    ("", ["--budget-ms", "inf"], "budget_ms"), ("", ["--budget-ms", "nan"], "budget_ms"),
    ("[serve]\nlinger_ms = inf\n", [], "linger_ms"), ("[serve]\nshutdown_timeout_s = nan\n", [], "shutdown_timeout_s"),
    ("[serve]\nmax_queue = 10000000000\n", [], "max_queue"), ("", ["--max-batch", "0"], "max_batch"),
    ("[serve]\nbudget_ms = 1e300\n", [], "budget_ms"),
])  # fmt: skip
def test_serve_refuses_numbers_it_cannot_honour(tmp_path, bsa_index, toml, flags, key):
    """Before issue 15, an infinite budget, linger or shutdown bound was accepted and failed later."""
    cfg = tmp_path / "serve.toml"
    cfg.write_text(toml)
    msg = one_line_error(run_cli("serve", "--index", str(bsa_index), "--config", str(cfg), "--metrics-port", "0",
                                 *flags))  # fmt: skip
    assert key in msg


def test_a_search_under_cprofile_leaves_its_profile(tmp_path, data, bsa_index):
    """`rtsearch search` run as the process ends without the interpreter's teardown, except under a profiler,
    whose file is written at that teardown (bench/search.py profiles a search this way)."""
    prof = tmp_path / "search.prof"
    cmd = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "rtsearch.cli", "search",
           str(data / "bsa-orbitrapxl" / "BSA1.mzML.gz"), "--index", str(bsa_index), "--backend", "numpy",
           "-o", str(tmp_path / "out.tsv")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import pstats

    assert any("search_runs" in name for _, _, name in pstats.Stats(str(prof)).stats)  # type: ignore[attr-defined]


def test_a_search_forks_its_reader_processes(tmp_path, data, bsa_index):
    """The reader's worker processes are forked (the search's process has one thread then and no CuPy), not spawned:
    spawned, each imports NumPy, Arrow and rtsearch itself before it parses (the inputs' hashing thread, started
    first, made every search spawn them)."""
    code = f"""
import sys
from rtsearch.io import batches
batches.PARALLEL_MIN_BYTES, batches.PART_MIN_BYTES, batches.MIN_WORKERS = 0, 1 << 18, 2
made = []
class Recorded(batches.PartPool):
    def __init__(self, workers):
        super().__init__(workers)
        made.append(self.forked)
batches.PartPool = Recorded
import rtsearch.search.offline as offline
offline.PartPool = Recorded
from rtsearch.cli import main
rc = main(["search", {str(data / "iprg2013-f13" / "F13.mgf")!r}, "--index", {str(bsa_index)!r}, "--readers", "2",
           "--backend", "numpy", "-o", {str(tmp_path / "out.tsv")!r}])
print(rc, made)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "0 [True]", proc.stdout
