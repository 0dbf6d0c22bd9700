"""Spectral alignment with unknown shifts, the NumPy reference's speed (issue 18: the GPU kernel's baseline).

Reads the FLASHApp E. coli run's MS2 spectra (`toppic_ms2.msalign`), builds the proteoform database of its
FASTA, and aligns each searchable spectrum's PRMs (HCD/CID b/y, merged within the tolerance) against
``--proteins`` proteoforms chosen at random (seeded; each protein's first N-terminal form, its prefix masses
cut to ``--max-residues``), with up to ``--shifts`` unknown shifts of at most 500 Da. Reports grid cells
(PRMs × prefix masses × (shifts + 1)) a second. One JSON line.

    python bench/topdown_align.py --data ../shared/data [--proteins 20] [--shifts 1] [--spectra 50]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.peers import cpu_model  # noqa: E402
from rtsearch.config import ProteoformConfig  # noqa: E402
from rtsearch.database.fasta import read_fasta  # noqa: E402
from rtsearch.io.msalign import read_msalign  # noqa: E402
from rtsearch.proteoforms.database import build_proteoforms  # noqa: E402
from rtsearch.scoring.topdown.align import align  # noqa: E402
from rtsearch.scoring.topdown.prm import prm_masses  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--proteins", type=int, default=20)
    ap.add_argument("--spectra", type=int, default=50)
    ap.add_argument("--shifts", type=int, default=1)
    ap.add_argument("--max-residues", type=int, default=400)
    ap.add_argument("--tolerance", type=float, default=0.02)
    args = ap.parse_args()
    folder = args.data / "topdown-flashapp-ecoli"
    db = build_proteoforms(read_fasta(folder / "example_database.fasta"), ProteoformConfig(decoys="none"))
    spectra = [s for s in read_msalign(folder / "toppic_ms2.msalign") if not s.problem][: args.spectra]
    rng = np.random.default_rng(1)
    chosen = rng.choice(db.counts["proteins"], args.proteins, replace=False)
    prefixes = [db.prefix_of(int(k))[: args.max_residues + 1] for k in chosen]
    cells, t0 = 0, time.perf_counter()
    for sp in spectra:
        prm = prm_masses(sp.mass, sp.precursors[0].mass, sp.activation, merge_within=args.tolerance)
        for prefix in prefixes:
            align(prm, prefix, tolerance=args.tolerance, max_shifts=args.shifts)
            cells += len(prm) * len(prefix) * (args.shifts + 1)
    secs = time.perf_counter() - t0
    print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
                      "cpus": os.cpu_count(), "spectra": len(spectra), "proteoforms": len(prefixes),
                      "shifts": args.shifts,
                      "alignments": len(spectra) * len(prefixes), "cells": cells, "seconds": round(secs, 3),
                      "cells_per_second": round(cells / secs), "alignments_per_second": round(
                          len(spectra) * len(prefixes) / secs, 1)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
