"""An entrapment check anyone can run: are rtsearch's 1 % really 1 %? (issue 17)

For each dev run (`tests/devruns.py`: BSA1, Ecoli_MS2_small, demo, SmallCalibratible_Yeast) the run's
database gets a 1:1 entrapment: every protein again, its residues shuffled (one ``random.Random(20240531)``
over the proteins in file order), headed ``ENTRAP_<header>``. The combined database is indexed (its decoys
made as usual), the run searched with `rtsearch search` (NumPy), and the accepted target PSMs at q ≤ 0.01
counted with those whose proteins are all entrapment ones. Estimated false discovery proportion, the
combined estimator with r = 1 (Wen et al. 2025, "Assessment of false discovery rate control in
tandem mass spectrometry analysis using entrapment"): FDP ≈ N_entrapment × (1 + 1/r) / N_accepted; estimated
true PSMs = N_accepted − 2 × N_entrapment. Prints one JSON line per run and one pooled.

    python bench/entrapment.py --data ../shared/data [--runs BSA1,demo] [--work DIR] [--config-args ...]
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyteomics import fasta  # noqa: E402

from rtsearch.cli import main as rtsearch  # noqa: E402
from tests.devruns import DEV_RUNS, DevRun  # noqa: E402

SEED = 20240531
PREFIX = "ENTRAP_"


def entrapment_fasta(fastas: list[Path], out: Path) -> int:
    """Write ``fastas`` and a residue-shuffled copy of each protein (``ENTRAP_`` headers); proteins written."""
    rng = random.Random(SEED)
    n = 0
    with open(out, "w") as fh:
        for path in fastas:
            for header, seq in fasta.read(str(path)):
                residues = list(seq)
                rng.shuffle(residues)
                fh.write(f">{header}\n{seq}\n>{PREFIX}{header}\n{''.join(residues)}\n")
                n += 2
    return n


def count(results: Path, level: float = 0.01) -> dict[str, Any]:
    """Accepted target PSMs at q ≤ ``level`` in a results file, those of entrapment proteins only, the estimates."""
    accepted = entrapment = 0
    with open(results, newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["q_value"] == "" or row["is_decoy"] == "true" or float(row["q_value"]) > level:
                continue
            accepted += 1
            entrapment += all(p.startswith(PREFIX) for p in row["proteins"].split(";"))
    return {"accepted": accepted, "entrapment": entrapment,
            "fdp": round(2 * entrapment / accepted, 4) if accepted else 0.0,
            "true_estimate": accepted - 2 * entrapment}  # fmt: skip


def check(dev: DevRun, data: Path, work: Path, indexes: dict[tuple[str, ...], Path], extra: list[str]) -> dict:
    fastas, run = dev.paths(data)
    if dev.fastas not in indexes:
        key = "+".join(Path(f).stem for f in dev.fastas)
        combined = work / f"entrap-{key}.fasta"
        entrapment_fasta(fastas, combined)
        folder = work / f"idx-{key}"
        if not folder.is_dir() and rtsearch(["index", "build", "--fasta", str(combined), "--out", str(folder)]) != 0:
            raise SystemExit(f"index build failed for {dev.fastas}")
        indexes[dev.fastas] = folder
    toml = work / f"{dev.name}.toml"
    toml.write_text(f'[search]\nprecursor_tolerance = "{dev.precursor}"\nfragment_tolerance = "{dev.fragment}"\n')
    out = work / f"{dev.name}.tsv"
    code = rtsearch(["search", str(run), "--index", str(indexes[dev.fastas]), "--config", str(toml),
                     "--backend", "numpy", "-o", str(out), *extra])  # fmt: skip
    if code != 0:
        raise SystemExit(f"search failed for {dev.name}")
    return {"run": dev.name, **count(out)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--runs", default=",".join(d.name for d in DEV_RUNS))
    ap.add_argument("--work", type=Path, help="keep databases, indexes and results here (default: a temp folder)")
    ap.add_argument("--search-args", default="", help="extra `rtsearch search` arguments")
    args = ap.parse_args()
    wanted = args.runs.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        indexes: dict[tuple[str, ...], Path] = {}
        lines = [check(d, args.data, work, indexes, args.search_args.split()) for d in DEV_RUNS if d.name in wanted]
    for line in lines:
        print(json.dumps(line), flush=True)
    acc, ent = sum(x["accepted"] for x in lines), sum(x["entrapment"] for x in lines)
    print(json.dumps({"run": "pooled", "accepted": acc, "entrapment": ent,
                      "fdp": round(2 * ent / acc, 4) if acc else 0.0, "true_estimate": acc - 2 * ent}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
