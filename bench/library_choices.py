"""Where rtsearch does by hand what a maintained library does, the measurement behind the choice (dev machine):

- PEP by pool-adjacent-violators (`rtsearch.search.fdr.peps`) on 50,000 seeded PSMs (scikit-learn's isotonic
  regression would add scikit-learn and SciPy to the core);
- Unimod names from psims' bundled XML (`rtsearch.database.unimod`) against psims' own `Unimod` (an SQLAlchemy
  database built from the same XML, given a local copy);
- library readers (`rtsearch.library.formats.read_entries`) against mzspeclib on the shared libraries, mzspeclib run
  by ``--mzspeclib-python`` (an environment of its own: python3 -m venv X && X/bin/pip install mzspeclib).

    python3 bench/library_choices.py --data ../shared/data [--mzspeclib-python /tmp/msl/bin/python]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtsearch.library.formats import read_entries  # noqa: E402
from rtsearch.search.fdr import peps  # noqa: E402

FILES = ("PrositLib.dlib", "BCS_hela.elib", "nist-bsa_consensus.msp")
MZSPECLIB = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
from mzspeclib import SpectrumLibrary
t = time.perf_counter()
try:
    n = sum(1 for _ in SpectrumLibrary(filename=sys.argv[1]))
    print(json.dumps({"entries": n, "seconds": round(time.perf_counter() - t, 3)}))
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {str(e)[:120]}", "seconds": round(time.perf_counter() - t, 3)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--mzspeclib-python", help="a Python with mzspeclib installed")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    score, decoy = rng.normal(0, 1, 50_000), rng.random(50_000) < 0.3
    t = time.perf_counter()
    for _ in range(20):
        peps(score, decoy)
    print(json.dumps({"peps_50k_ms": round((time.perf_counter() - t) / 20 * 1e3, 2)}))

    from psims.controlled_vocabulary import vendor
    from psims.controlled_vocabulary.unimod import Unimod

    from rtsearch.database import unimod

    t = time.perf_counter()
    unimod._table()
    ours = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        xml = os.path.join(d, "unimod.xml")
        with gzip.open(os.path.join(os.path.dirname(vendor.__file__), "unimod_tables.xml.gz")) as f, \
                open(xml, "wb") as g:  # fmt: skip
            shutil.copyfileobj(f, g)
        t = time.perf_counter()
        Unimod(None, unimod_xml_uri=xml).get("Label:13C(6)")
        theirs = time.perf_counter() - t
    print(json.dumps({"unimod_rtsearch_s": round(ours, 3), "unimod_psims_s": round(theirs, 3)}))

    for name in FILES:
        path = args.data / "spectral-libraries" / name
        t = time.perf_counter()
        n = sum(1 for _ in read_entries(path))
        row = {"file": name, "rtsearch": {"entries": n, "seconds": round(time.perf_counter() - t, 3)}}
        if args.mzspeclib_python:
            out = subprocess.run([args.mzspeclib_python, "-c", MZSPECLIB, str(path)], capture_output=True, text=True,
                                 timeout=600)  # fmt: skip
            said = out.stdout.strip()
            row["mzspeclib"] = json.loads(said.splitlines()[-1]) if said else out.stderr[-300:]
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
