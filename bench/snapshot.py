"""What rtsearch's offline searches produce, to compare two versions of the code (a refactor changes none of it).

Runs the `rtsearch` command of the Python given (``--python``, default this one) on the four
development runs (database search, NumPy), BSA1 against the NIST BSA library (narrow and open),
and a library built from rtsearch's own Ecoli_MS2_small identifications; prints one JSON object:
per search, the rows, target PSMs and distinct peptides at q <= 0.01, and the SHA-256 of the
results file and of its cells in the columns every search writes (`COMMON`). Two versions agree when
the objects are equal::

    python3 bench/snapshot.py --work /tmp/snap-new > new.json
    PYTHONPATH=/path/to/old/checkout python3 bench/snapshot.py --work /tmp/snap-old > old.json
    diff old.json new.json
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import data_dir  # noqa: E402
from tests.devruns import DEV_RUNS  # noqa: E402

CLI = "import sys; from rtsearch.cli import main; sys.exit(main())"


def rtsearch(python: str, *args: str | Path) -> None:
    # run outside any checkout: `python -c` puts the working folder first on sys.path, before PYTHONPATH
    subprocess.run([python, "-c", CLI, *map(str, args)], check=True, stdout=subprocess.DEVNULL, cwd="/")


# the columns every kind of search writes; their cells are compared, whatever else a file holds
COMMON = ("run", "scan", "charge", "precursor_mz", "calc_mz", "ppm_error", "peptide", "proteins", "is_decoy", "score",
          "q_value", "peptide_q_value", "matched_peaks", "reason")  # fmt: skip


def counts(path: Path) -> dict[str, object]:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    common = "\n".join("\t".join(r[c] for c in COMMON) for r in rows).encode()
    ok = [r for r in rows if r["q_value"] and float(r["q_value"]) <= 0.01 and r["is_decoy"] == "false"]
    peptides = {r["peptide"] for r in rows if r["peptide_q_value"] and float(r["peptide_q_value"]) <= 0.01
                and r["is_decoy"] == "false"}  # fmt: skip
    return {"rows": len(rows), "psms_at_1pct": len(ok), "peptides_at_1pct": len(peptides),
            "columns": list(rows[0]) if rows else [], "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "common_sha256": hashlib.sha256(common).hexdigest()}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True, type=Path, help="folder for indexes, libraries and results")
    p.add_argument("--python", default=sys.executable, help="the Python whose rtsearch is run")
    args = p.parse_args()
    data, work, py = data_dir(), args.work.resolve(), args.python
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, object] = {}
    indexes: dict[tuple[str, ...], Path] = {}
    for dev in DEV_RUNS:
        fastas, run = dev.paths(data)
        if dev.fastas not in indexes:
            indexes[dev.fastas] = work / f"idx{len(indexes)}"
            rtsearch(py, "index", "build", "--fasta", *fastas, "--out", indexes[dev.fastas])
        toml = work / f"{dev.name}.toml"
        toml.write_text(f'[search]\nprecursor_tolerance = "{dev.precursor}"\nfragment_tolerance = "{dev.fragment}"\n')
        res = work / f"{dev.name}.tsv"
        rtsearch(py, "search", run, "--index", indexes[dev.fastas], "--config", toml, "--backend", "numpy", "-o", res)
        out[f"database/{dev.name}"] = counts(res)
    bsa1 = data / "bsa-orbitrapxl/BSA1.mzML.gz"
    rtsearch(py, "library", "import", data / "spectral-libraries/nist-bsa_consensus.msp", "--out", work / "bsa.lib")
    for mode in ("narrow", "open"):
        res = work / f"BSA1-{mode}.tsv"
        rtsearch(py, "search", bsa1, "--library", work / "bsa.lib", "--backend", "numpy", "-o", res,
                 *(["--open"] if mode == "open" else []))  # fmt: skip
        out[f"library/BSA1/{mode}"] = counts(res)
    ecoli = data / "ecoli-small/Ecoli_MS2_small.mzML"
    rtsearch(py, "index", "build", "--fasta", data / "ecoli-small/ecoli.fasta", "--out", work / "ecoli.idx")
    rtsearch(py, "search", ecoli, "--index", work / "ecoli.idx", "--backend", "numpy", "-o", work / "ecoli.tsv")
    rtsearch(py, "library", "build", work / "ecoli.tsv", ecoli, "--out", work / "own.msp", "--peak-tolerance", "0.5")
    rtsearch(py, "library", "import", work / "own.msp", "--out", work / "own.lib")
    rtsearch(py, "search", ecoli, "--library", work / "own.lib", "--backend", "numpy", "-o", work / "own.tsv")
    out["library/own/Ecoli_MS2_small"] = counts(work / "own.tsv")
    print(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
