"""Where ``rtsearch search``'s wall goes, phase by phase, in one process (issue 17: the search ≤ 2 s).

Runs the CLI's ``search`` in this process on the bench MGF and the 20,000-protein index (those of
`bench/search_wall.py`), with the phases timed by wrapping the functions that do them: imports,
counting the spectra, opening the target (index load, GPU upload), reading (the reader thread's own
time), scoring (``target.score`` summed), FDR (``PsmTable.finalize``), writing. Then lists the slowest
imports (``python -X importtime``). Prints one JSON line (and writes ``--json``).

    python3 bench/search_phases.py --data .gpudata/data --index-cache .benchcache/idx20k
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPENT: dict[str, float] = defaultdict(float)


PROFILED: dict[str, list[tuple[str, float]]] = {}


def timed(owner: Any, attr: str, phase: str, *, profile: bool = False) -> None:
    """Wrap ``owner.attr`` so its seconds add up under ``phase`` (its costliest functions kept if ``profile``)."""
    fn = getattr(owner, attr)

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        prof = cProfile.Profile() if profile else None
        try:
            return prof.runcall(fn, *a, **kw) if prof else fn(*a, **kw)
        finally:
            SPENT[phase] += time.perf_counter() - t0
            if prof:
                rows = pstats.Stats(prof).stats.items()  # type: ignore[attr-defined]
                cum = [(f"{Path(f).name}:{ln}({name})", st[3]) for (f, ln, name), st in rows]
                top = sorted(cum, key=lambda r: -r[1])
                PROFILED[phase] = [(k, round(v, 3)) for k, v in top[:25]]

    setattr(owner, attr, wrapper)


def slowest_imports(top: int) -> list[tuple[str, float]]:
    """Cumulative import seconds of the slowest modules of ``rtsearch.cli`` with a search's imports."""
    code = "import rtsearch.cli, rtsearch.cli.search, rtsearch.search.offline, rtsearch.io.results, rtsearch.cli.target"
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         cwd=ROOT).stderr  # fmt: skip
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((parts[2].rstrip(), int(parts[1]) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:top]


def main() -> int:
    from bench.serving import bench_inputs, emit, index_and_record
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_inputs(ap)
    ap.add_argument("--profile", action="append", default=[], choices=["open target", "fdr", "write"],
                    help="keep this phase's costliest functions (cProfile, cumulative)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from bench.bulk_bench import looped_spectra, write_mgf

    _, res, index = index_and_record(args.data, args.proteins, args.index_cache)
    del index
    with tempfile.TemporaryDirectory() as tmp_s:
        mgf = Path(tmp_s) / "bulk.mgf"
        write_mgf(looped_spectra(args.data, args.spectra), mgf)
        for mod in [m for m in list(sys.modules) if m.startswith("rtsearch")]:
            del sys.modules[mod]  # imported again below, timed
        t0 = time.perf_counter()
        import rtsearch.cli as cli
        import rtsearch.cli.search as cli_search
        import rtsearch.io.results as results
        import rtsearch.search.offline as offline
        import rtsearch.search.table as table

        SPENT["imports"] = time.perf_counter() - t0
        timed(offline, "count_spectra", "count spectra")
        timed(cli_search, "open_target", "open target", profile="open target" in args.profile)
        timed(offline.SpectrumReader, "_read", "read (reader thread)")
        timed(table.PsmTable, "finalize", "fdr", profile="fdr" in args.profile)
        timed(results, "write_table", "write", profile="write" in args.profile)
        orig_runs = offline.search_runs

        def search_runs(runs: Any, target: Any, **kw: Any) -> Any:
            timed(target, "score", "score")
            t = time.perf_counter()
            try:
                return orig_runs(runs, target, **kw)
            finally:
                SPENT["search_runs (score + wait + fdr)"] += time.perf_counter() - t

        offline.search_runs = search_runs  # type: ignore[assignment]
        t1 = time.perf_counter()
        out = Path(tmp_s) / "o.tsv"
        rc = cli.main(["search", str(mgf), "--index", str(args.index_cache.resolve()), "-o", str(out)])
        SPENT["cli main"] = time.perf_counter() - t1
    res.update(rc=rc, phases={k: round(v, 3) for k, v in SPENT.items()}, profiled=PROFILED,
               slowest_imports=slowest_imports(15))
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
