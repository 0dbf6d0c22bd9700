"""How fast `rtsearch.search.offline.SpectrumReader` hands over a large MGF's batches, with nothing else running
(issue 17: reading was the search's critical path once the target opened in 0.4 s).

Writes the 50,000-spectrum bench MGF (`bench/bulk_bench.py`'s) and an mzML of the E. coli run's spectrum list
repeated to as many spectra, then, for each file and ``--workers`` count, in a new process: the reader made
first thing (its workers forked), every batch taken as it comes; prints when the first and the last batch
arrived; for the MGF also when the part plan and each part were ready. One JSON line.

    python3 bench/reader_timeline.py --data .gpudata/data [--workers 1,4,8,16] [--formats mgf,mzml]
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
t = time.perf_counter(); plan = b.plan(p, n, pool.map); t_parts = time.perf_counter() - t
t = time.perf_counter()
futs = [pool.executor.submit(b._read_part, plan, k, 1024) for k in range(len(plan.parts))]
done = [round((f.result(), time.perf_counter() - t)[1], 3) for f in futs]
pool.close()
t = time.perf_counter(); b._read_part(plan, len(plan.parts) // 2, 1024); one = time.perf_counter() - t
print(json.dumps({"workers": n, "arrow_threads_1": sys.argv[3] == "1", "pool_s": round(t_pool, 3),
                  "parts_s": round(t_parts, 3), "parts_done_s": done, "one_part_here_s": round(one, 3)}))
"""


def write_looped_mzml(run: Path, n: int, out: Path) -> None:
    """``run``'s spectrum list repeated until it holds at least ``n`` spectra (ids repeat; readers ignore the
    index after it)."""
    text = run.read_bytes()
    a, b = text.index(b"<spectrum "), text.rindex(b"</spectrum>") + len(b"</spectrum>")
    times = -(-n // text[a:b].count(b"<spectrum "))
    with open(out, "wb") as fh:
        fh.write(text[:a])
        for _ in range(times):
            fh.write(text[a:b])
        fh.write(text[b:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--spectra", type=int, default=50_000)
    ap.add_argument("--workers", default="4,8,16")
    ap.add_argument("--formats", default="mgf,mzml")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res: dict = {"runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        if "mgf" in args.formats:
            files["mgf"] = Path(tmp) / "bulk.mgf"
            write_mgf(looped_spectra(args.data, args.spectra), files["mgf"])
        if "mzml" in args.formats:
            files["mzml"] = Path(tmp) / "bulk.mzML"
            write_looped_mzml(args.data / "ecoli-small" / "Ecoli_MS2_small.mzML", args.spectra, files["mzml"])
        for fmt, path in files.items():
            for w in [int(x) for x in args.workers.split(",")]:
                for _ in range(2):
                    out = subprocess.run([sys.executable, "-c", PROBE, str(path), str(w)], capture_output=True,
                                         text=True, env=code_env(), cwd=tmp)  # fmt: skip
                    row = json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-800:]}
                    row.update(format=fmt, workers=w, bytes=path.stat().st_size)
                    print(json.dumps(row), flush=True)
                    res["runs"].append(row)
                for arrow1 in ("0", "1") if fmt == "mgf" else ():  # the MGF's stages: pool, part plan, each part
                    out = subprocess.run([sys.executable, "-c", STAGES, str(path), str(w), arrow1],
                                         capture_output=True, text=True, env=code_env(), cwd=tmp)  # fmt: skip
                    row = json.loads(out.stdout) if out.returncode == 0 else {"workers": w, "error": out.stderr[-800:]}
                    print(json.dumps(row), flush=True)
                    res["runs"].append(row)
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
