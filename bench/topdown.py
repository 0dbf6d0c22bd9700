"""Top-down search on a real run beside TopPIC: PrSMs at 1 % FDR and seconds.

rtsearch: the FLASHApp E. coli run's MS2 spectra against its database with shuffled decoys, each spectrum's best
PrSM (`rtsearch.scoring.topdown.search`), q-values over the PrSMs by target-decoy (`rtsearch.search.fdr.q_values`
on −log10 E-value, and on the matched-PRM count beside it), on ``--backend``. TopPIC (``--toppic``, where
``toppic`` is on the PATH; Debian's package): `bench/toppic_run.py` on the same msalign and FASTA (one unknown
shift within ±500 Da, 15 ppm, 1 % FDR by its own decoys).

    python3 bench/topdown.py --data ../shared/data [--backend cupy --truncations] [--toppic] [--json topdown.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import emit  # noqa: E402
from rtsearch.config import ProteoformConfig, TopDownConfig  # noqa: E402
from rtsearch.database.fasta import read_fasta  # noqa: E402
from rtsearch.io.msalign import read_msalign  # noqa: E402
from rtsearch.proteoforms.database import build_proteoforms  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.scoring.topdown.search import search_batch  # noqa: E402
from rtsearch.scoring.topdown.truncation import Positions  # noqa: E402
from rtsearch.search.fdr import q_values  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--tolerance", type=float, default=0.02, help="fragment tolerance floor, Da")
    ap.add_argument("--ppm", type=float, default=10.0, help="fragment tolerance, ppm of the precursor mass")
    ap.add_argument("--shifts", type=int, default=1)
    ap.add_argument("--known-shifts", type=int, default=TopDownConfig.known_shifts,
                    help="known PTMs a PrSM may hold besides (0: known PTMs only as unknown shifts)")
    ap.add_argument("--truncations", action="store_true", help="truncated sub-sequences as candidates too")
    ap.add_argument("--limit", type=int, default=0, help="the run's first N searchable spectra only")
    ap.add_argument("--backend", default="numpy", choices=["numpy", "cupy"],
                    help="for the alignments and the truncations' counts")
    ap.add_argument("--toppic", action="store_true", help="TopPIC on the same files too (toppic on the PATH)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    folder = args.data / "topdown-flashapp-ecoli"
    db = build_proteoforms(read_fasta(folder / "example_database.fasta"), ProteoformConfig())
    spectra = [s for s in read_msalign(folder / "toppic_ms2.msalign") if not s.problem][: args.limit or None]
    settings = TopDownConfig(tolerance_da=args.tolerance, fragment_ppm=args.ppm, max_shifts=args.shifts,
                             known_shifts=args.known_shifts, truncations=args.truncations)
    t0 = time.perf_counter()
    xp = get_backend(args.backend).xp
    positions = Positions(db, xp) if args.truncations else None
    found = [r for r in search_batch(db, spectra, settings, positions, xp=xp) if r.protein >= 0]
    secs = time.perf_counter() - t0
    score = np.array([r.score for r in found], float)
    evalue = np.array([-r.log10_evalue for r in found], float)
    decoy = np.array([r.decoy for r in found], bool)
    q = q_values(evalue, decoy)
    q_count = q_values(score, decoy)
    for r in sorted(found, key=lambda r: r.log10_evalue)[:12]:
        print(r.scan, db.accessions[r.protein], r.start, r.end, r.form, r.score, r.shifts, r.known,
              round(r.mass_difference, 3), f"E=1e{r.log10_evalue:.1f}", r.prms)  # fmt: skip
    res = {"spectra": len(spectra), "with_prsm": len(found), "decoy_prsms": int(decoy.sum()),
           "targets_at_1pct": int(((q <= 0.01) & ~decoy).sum()), "targets_at_5pct": int(((q <= 0.05) & ~decoy).sum()),
           "by_count_at_1pct": int(((q_count <= 0.01) & ~decoy).sum()),
           "best_target_log10_e": round(-float(evalue[~decoy].max(initial=0)), 2),
           "best_decoy_log10_e": round(-float(evalue[decoy].max(initial=0)), 2), "seconds": round(secs, 2),
           "truncations": args.truncations, "backend": args.backend, "settings": vars(settings)}  # fmt: skip
    print(f"rtsearch ({args.backend}): {res['targets_at_1pct']} PrSMs at 1 % of {len(spectra)} spectra in {secs:.1f} s")
    if args.toppic:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "toppic.json"
            run = subprocess.run([sys.executable, str(ROOT / "bench" / "toppic_run.py"), "--msalign",
                                  str(folder / "toppic_ms2.msalign"), "--fasta", str(folder / "example_database.fasta"),
                                  "--work", str(Path(tmp) / "work"), "--skip-html", "--json", str(out)],
                                 capture_output=True, text=True, check=False)  # fmt: skip
            if out.is_file():
                top = json.loads(out.read_text())
                res["toppic"] = {"prsms_at_1pct": top["n_prsms"], "wall_s": top["wall_s"], "command": top["command"]}
                print(f"TopPIC: {top['n_prsms']} PrSMs at 1 % in {top['wall_s']} s")
            else:
                res["toppic"] = {"error": (run.stderr or run.stdout)[-1500:]}
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
