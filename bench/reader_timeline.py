"""How fast `rtsearch.search.offline.SpectrumReader` hands over a large MGF's batches, with nothing else running
(issue 17: reading was the search's critical path once the target opened in 0.4 s).

Writes the 50,000-spectrum bench MGF (`bench/bulk_bench.py`'s), then, for each ``--workers`` count, in a new
process: the reader made first thing (its workers forked), every batch taken as it comes; prints when the
first and the last batch arrived and when the part plan and each part were ready. One JSON line.

    python3 bench/reader_timeline.py --data .gpudata/data [--workers 4,8,16]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bulk_bench import looped_spectra, write_mgf  # noqa: E402
from bench.serving import code_env, emit  # noqa: E402

PROBE = r"""
import json, os, sys, time
t0 = time.perf_counter()
os.cpu_count = lambda: int(sys.argv[2])
import rtsearch.io.batches as b
from rtsearch.search.offline import SpectrumReader
t_import = time.perf_counter() - t0
n, first = 0, None
with SpectrumReader([sys.argv[1]], batch_size=1024) as reader:
    t_made = time.perf_counter() - t0
    for batch in reader:
        first = first or time.perf_counter() - t0
        n += len(batch)
    last = time.perf_counter() - t0
print(json.dumps({"workers": int(sys.argv[2]), "forked": reader._pool.forked if reader._pool else None,
                  "spectra": n, "imported_s": round(t_import, 3), "reader_made_s": round(t_made, 3),
                  "first_batch_s": round(first, 3), "last_batch_s": round(last, 3),
                  "total": reader.total}))
"""

STAGES = r"""
import json, os, sys, time
import pyarrow as pa
import rtsearch.io.batches as b
from pathlib import Path
n, p = int(sys.argv[2]), Path(sys.argv[1])
if sys.argv[3] == "1":
    pa.set_cpu_count(1)
t = time.perf_counter(); pool = b.PartPool(n); t_pool = time.perf_counter() - t
t = time.perf_counter(); parts, before, head = b._parts(p, n, pool.map); t_parts = time.perf_counter() - t
t = time.perf_counter()
futs = [pool.executor.submit(b._read_part, p, pt, head, k, 1024) for pt, k in zip(parts, before)]
done = [round((f.result(), time.perf_counter() - t)[1], 3) for f in futs]
pool.close()
t = time.perf_counter(); b._read_part(p, parts[1], head, before[1], 1024); one = time.perf_counter() - t
print(json.dumps({"workers": n, "arrow_threads_1": sys.argv[3] == "1", "pool_s": round(t_pool, 3),
                  "parts_s": round(t_parts, 3), "parts_done_s": done, "one_part_here_s": round(one, 3)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--spectra", type=int, default=50_000)
    ap.add_argument("--workers", default="4,8,16")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res: dict = {"runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        mgf = Path(tmp) / "bulk.mgf"
        write_mgf(looped_spectra(args.data, args.spectra), mgf)
        for w in [int(x) for x in args.workers.split(",")]:
            for _ in range(2):
                out = subprocess.run([sys.executable, "-c", PROBE, str(mgf), str(w)], capture_output=True, text=True,
                                     env=code_env(), cwd=tmp)  # fmt: skip
                row = json.loads(out.stdout) if out.returncode == 0 else {"workers": w, "error": out.stderr[-800:]}
                print(json.dumps(row), flush=True)
                res["runs"].append(row)
            for arrow1 in ("0", "1"):  # the stages, in the probe's own process: pool, part plan, each part
                out = subprocess.run([sys.executable, "-c", STAGES, str(mgf), str(w), arrow1], capture_output=True,
                                     text=True, env=code_env(), cwd=tmp)  # fmt: skip
                row = json.loads(out.stdout) if out.returncode == 0 else {"workers": w, "error": out.stderr[-800:]}
                print(json.dumps(row), flush=True)
                res["runs"].append(row)
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
