"""MS1 features beside OpenMS's FeatureFindingMetabo on the lcms-ms1 runs: found, same charge, m/z, count.

OpenMS (`tests/interop/openms_features.py`, run by ``--openms-python``, the interop environment's Python):
MassTraceDetection → ElutionPeakDetection → FeatureFindingMetabo, peptide isotope model, charges 1–6. rtsearch:
`rtsearch.signal.features.detect_features` with its defaults. An OpenMS charged feature is found when an rtsearch
feature's monoisotopic m/z lies within ``--ppm`` of its m/z and its apex within its RT span (a second's slack);
among those, the one whose apex is nearest OpenMS's is its match (where OpenMS's feature spans several rtsearch
peaks of one trace, the one at its apex), whose charge and m/z are compared. Covered: an rtsearch feature within
``--ppm`` whose RT span overlaps OpenMS's (one elution OpenMS cut in pieces is one rtsearch feature, its apex in one
piece). BSA1 (`bsa-orbitrapxl`) beside the lcms-ms1 runs: a slower run (MS1 1.65 s apart).

    python3 bench/ms1_features.py --data ../shared/data --openms-python .venv-interop/bin/python [--json f.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.signal.features import FeatureSettings, detect_features  # noqa: E402

RUNS = ("lcms-ms1/MapAlignmentAlgorithmPoseClustering_in1.mzML.gz",
        "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in2.mzML.gz", "lcms-ms1/MassTraceExtractor_1_input.mzML",
        "lcms-ms1/FeatureFinderMetaboIdent_1_input.mzML", "bsa-orbitrapxl/BSA1.mzML.gz")  # fmt: skip
SCRIPT = ROOT / "tests" / "interop" / "openms_features.py"


def openms(python: str, path: Path, ppm: float) -> dict[str, np.ndarray]:
    """OpenMS's features of ``path`` as columns."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "features.tsv"
        subprocess.run([python, str(SCRIPT), str(path), str(ppm), str(out)], check=True, capture_output=True)
        rows = list(csv.DictReader(out.open(), delimiter="\t"))
    return {k: np.array([float(r[k]) for r in rows]) for k in (rows[0] if rows else {"mz": 0, "charge": 0})}


def compare(theirs: dict[str, np.ndarray], mine: dict[str, np.ndarray], ppm: float) -> dict[str, Any]:
    """The comparison of one run (see the module docstring)."""
    charged = np.flatnonzero(theirs["charge"] > 0)
    order = np.argsort(mine["mz"])
    mz = mine["mz"][order]
    found, same, covered, err = 0, 0, 0, []
    for i in charged.tolist():
        x = theirs["mz"][i]
        lo, hi = np.searchsorted(mz, x * (1 - ppm * 1e-6)), np.searchsorted(mz, x * (1 + ppm * 1e-6), side="right")
        cand = order[lo:hi]
        overlap = (mine["rt_start"][cand] <= theirs["rt_max"][i]) & (mine["rt_end"][cand] >= theirs["rt_min"][i])
        covered += bool(np.any(overlap))
        apex = mine["rt_apex"][cand]
        cand = cand[(apex >= theirs["rt_min"][i] - 1) & (apex <= theirs["rt_max"][i] + 1)]
        if cand.size == 0:
            continue
        best = cand[np.lexsort((np.abs(mine["mz"][cand] - x), np.abs(mine["rt_apex"][cand] - theirs["rt"][i])))[0]]
        found += 1
        same += int(mine["charge"][best] == theirs["charge"][i])
        err.append((mine["mz"][best] - x) / x * 1e6)
    n = max(charged.size, 1)
    return {"openms_features": int(theirs["mz"].size), "openms_charged": int(charged.size),
            "rtsearch_features": int(mine["mz"].size), "rtsearch_charged": int(np.sum(mine["charge"] > 0)),
            "found": round(found / n, 4), "covered": round(covered / n, 4),
            "same_charge": round(same / max(found, 1), 4),
            "mz_ppm_abs_max": round(float(np.max(np.abs(err))), 2) if err else None,
            "count_ratio": round(mine["mz"].size / max(theirs["mz"].size, 1), 3)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--openms-python", required=True, help="a Python with pyopenms (the interop environment's)")
    ap.add_argument("--ppm", type=float, default=10.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res = {}
    for name in RUNS:
        path = args.data / name
        theirs = openms(args.openms_python, path, args.ppm)
        t0 = time.perf_counter()
        f = detect_features(read_spectra(path, ms_levels=(1,)), FeatureSettings(ppm=args.ppm))
        row = compare(theirs, f.cols, args.ppm) | {"rtsearch_s": round(time.perf_counter() - t0, 2)}
        res[name] = row
        print(name.split("/")[-1], json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
