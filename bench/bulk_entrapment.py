"""The 50,000-spectrum bench's PSMs at 1 % FDR and those of entrapment proteins only, this checkout beside another.

The bench's inputs (`bench/search_wall.py`'s): the 20,000-protein index of `bench/stream_bench.py` (every FASTA of
``--data`` plus residue-shuffled ``ENTRAPMENT_`` proteins up to 20,000; built once into ``--index-cache``) and the
dev runs' spectra looped into one MGF. Each checkout runs ``rtsearch search`` as a new process
(`bench.bulk_bench.offline`, its default backend); printed per checkout: accepted target PSMs at q ≤ 0.01, those
whose proteins are all entrapment ones, and the search's seconds. The spectra repeat ~32 times, so this shows the
direction of a change, not the level of its false discoveries (`bench/entrapment.py` does that on whole runs).

    python bench/bulk_entrapment.py --data ../shared/data --index-cache .benchcache/idx20k [--baseline DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bulk_bench import looped_spectra, offline, write_mgf  # noqa: E402
from bench.serving import code_env, index_and_record  # noqa: E402

PREFIX = "ENTRAPMENT_"  # bench/search_bench.py's entrapment_fasta


def counts(results: Path, level: float = 0.01) -> tuple[int, int]:
    """Accepted target PSMs of a results file and those of entrapment proteins only."""
    accepted = entrapment = 0
    with open(results, newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["q_value"] and row["is_decoy"] == "false" and float(row["q_value"]) <= level:
                accepted += 1
                entrapment += all(p.startswith(PREFIX) for p in row["proteins"].split(";"))
    return accepted, entrapment


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--index-cache", type=Path, required=True)
    ap.add_argument("--spectra", type=int, default=50_000)
    ap.add_argument("--baseline", type=Path, help="another checkout, searched after this one")
    args = ap.parse_args()
    _, info, index = index_and_record(args.data, 20_000, args.index_cache)
    del index
    print(json.dumps({"index": info}), flush=True)
    codes = [("this", ROOT), *([("baseline", args.baseline.resolve())] if args.baseline else [])]
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        mgf = tmp / "bulk.mgf"
        write_mgf(looped_spectra(args.data, args.spectra), mgf)
        for name, code in codes:
            res = offline(args.index_cache.resolve(), mgf, tmp, code_env(code))
            accepted, entrapment = counts(tmp / "offline.tsv")
            print(json.dumps({"code": name, "checkout": str(code), "accepted": accepted, "entrapment_only": entrapment,
                              "seconds": res["seconds"], "rc": res["rc"]}), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
