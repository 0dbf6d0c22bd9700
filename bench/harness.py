"""What every benchmark suite shares: its inputs, the machine it ran on, and the record it writes.

Inputs are seeded and built from ``--data`` (a copy of ``../shared/data``; the GPU machine has no ``../shared``):

- the bench database: every FASTA of ``--data`` plus residue-shuffled ``ENTRAPMENT_`` proteins up to
  ``--proteins`` (20,000 by default; `entrapment_fasta`), indexed once into ``--index-cache`` (`bench_index`);
- the bench spectra: the dev runs' MS2 spectra with one known charge (`dev_spectra`), looped with new scan
  numbers to ``--spectra`` (`looped_spectra`), written as the MGF that ``rtsearch search`` and the shared client
  ``rt_load.py`` read (`write_mgf`).

Each suite ends with `emit`: one JSON object holding `machine` (CPU model, cores, GPU, Python), the commit
(``RTSEARCH_COMMIT`` where set, as on a machine the checkout was copied to; else ``git describe``), the command line
and the UTC time, beside the suite's figures.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "simulators"):  # a suite runs as `python bench/NAME.py` from a checkout
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from rtsearch.types import Spectrum  # noqa: E402

# the dev runs whose MS2 spectra the bench loops (each with one known charge)
RUNS = ("bsa-orbitrapxl/BSA1.mzML.gz", "ecoli-small/Ecoli_MS2_small.mzML", "yeast-small/SmallCalibratible_Yeast.mzML")


def machine() -> dict[str, Any]:
    """The CPU model and cores, the GPU (``nvidia-smi``'s name and memory; none on a machine without one), Python."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine())  # fmt: skip
    gpu = ""
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False)  # fmt: skip
        gpu = "; ".join(smi.stdout.strip().splitlines())
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu or "none", "python": platform.python_version()}


def commit() -> str:
    """``RTSEARCH_COMMIT`` where set (a checkout copied to another machine), else this checkout's commit with
    ``+dirty`` for local changes."""
    if os.environ.get("RTSEARCH_COMMIT"):
        return os.environ["RTSEARCH_COMMIT"]
    git = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty=+dirty", "--abbrev=12"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    return git.stdout.strip() if git.returncode == 0 else "unknown"


def emit(res: dict[str, Any], path: Path | None) -> None:
    """A suite's record, with the machine, the commit, the command and the time: one JSON line on stdout, and
    indented into ``path`` when given."""
    res = {"machine": machine(), "commit": commit(), "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
           "utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), **res}  # fmt: skip
    print(json.dumps(res), flush=True)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def code_env(code: Path = ROOT) -> dict[str, str]:
    """This environment with ``code`` (a checkout) and its simulators first on ``PYTHONPATH``: a suite compares
    two checkouts side by side by running each one's ``rtsearch`` this way."""
    paths = [str(code), str(code / "simulators"), *filter(None, os.environ.get("PYTHONPATH", "").split(":"))]
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": ":".join(paths)}


def inputs(ap: Any, *, spectra: int | None = 50_000) -> None:
    """The bench's inputs on an `argparse` parser: ``--data``, ``--index-cache`` (the bench index, built there
    once), ``--proteins`` and, unless ``spectra`` is None, ``--spectra``."""
    ap.add_argument("--data", type=Path, required=True, help="a copy of ../shared/data")
    ap.add_argument("--index-cache", type=Path, default=ROOT / ".benchcache" / "index",
                    help="where the bench index is built once and loaded from (default .benchcache/index)")
    ap.add_argument("--proteins", type=int, default=20_000, help="proteins of the bench database (default 20,000)")
    if spectra is not None:
        ap.add_argument("--spectra", type=int, default=spectra, help=f"looped spectra (default {spectra:,})")


def entrapment_fasta(data: Path, n_proteins: int, out: Path, seed: int = 7) -> int:
    """Write every FASTA of ``data`` plus residue-shuffled ``ENTRAPMENT_`` proteins up to ``n_proteins``; how many."""
    import numpy as np

    from rtsearch.database.fasta import read_fastas

    prots = read_fastas(sorted(data.rglob("*.fasta")))
    rng = np.random.default_rng(seed)
    lines = [f">{p.accession}\n{p.sequence}\n" for p in prots]
    i = 0
    while len(prots) + i < n_proteins:
        lines.append(f">ENTRAPMENT_{i:05d}\n{''.join(rng.permutation(list(prots[i % len(prots)].sequence)))}\n")
        i += 1
    out.write_text("".join(lines))
    return len(prots) + i


def bench_index(data: Path, proteins: int, cache: Path, database: Any = None) -> tuple[Any, dict[str, Any]]:
    """The bench index (``database``: a `DatabaseConfig` for its digest; default trypsin, 2 missed cleavages, ox M
    ≤ 2), loaded from ``cache`` or built there first, on the best backend; with how long that took."""
    from rtsearch.config import DatabaseConfig
    from rtsearch.database.build import build_index
    from rtsearch.database.store import load_index, save_index
    from rtsearch.scoring.backend import get_backend

    info: dict[str, Any] = {}
    if not (cache / "manifest.json").is_file():
        with tempfile.TemporaryDirectory() as tmp:
            fasta = Path(tmp) / "bench.fasta"
            info["proteins"] = entrapment_fasta(data, proteins, fasta)
            t0 = time.perf_counter()
            index = build_index([fasta], database or DatabaseConfig(), xp=get_backend("auto").xp)
            info["index_build_seconds"] = round(time.perf_counter() - t0, 2)
            save_index(index, cache)
    t0 = time.perf_counter()
    index = load_index(cache)
    info.update(index_load_seconds=round(time.perf_counter() - t0, 2), index_counts=index.manifest["counts"])
    return index, info


def dev_spectra(data: Path) -> list[Spectrum]:
    """The dev runs' MS2 spectra with one known charge and a precursor (what the shared client can send)."""
    from rtsearch.io.spectra import read_spectra

    return [sp for run in RUNS for sp in read_spectra(data / run)
            if len(sp.charges) == 1 and not sp.problem and sp.precursor_mz > 0]  # fmt: skip


def looped_spectra(data: Path, n: int) -> list[Spectrum]:
    """`dev_spectra` looped into one run of ``n``, scans 1..n."""
    pool = dev_spectra(data)
    return [dataclasses.replace(pool[i % len(pool)], run="bulk", scan=i + 1) for i in range(n)]


def write_mgf(spectra: Iterable[Spectrum], out: Path) -> int:
    """``spectra`` (one known charge each) as MGF; how many were written."""
    n = 0
    with open(out, "w") as fh:
        for sp in spectra:
            fh.write(f"BEGIN IONS\nTITLE={sp.run}.{sp.scan}\nSCANS={sp.scan}\nPEPMASS={sp.precursor_mz!r}\n"
                     f"CHARGE={sp.charges[0]}+\nRTINSECONDS={sp.rt!r}\n")  # fmt: skip
            fh.writelines(f"{m!r} {i!r}\n" for m, i in zip(sp.mz.tolist(), sp.intensity.tolist(), strict=True))
            fh.write("END IONS\n")
            n += 1
    return n


def bench_files(data: Path, proteins: int, spectra: int, work: Path) -> tuple[Path, Path]:
    """The bench FASTA and looped MGF as files in ``work``, written once per size (the peers read files)."""
    work.mkdir(parents=True, exist_ok=True)
    fasta, mgf = work / f"bench-{proteins}.fasta", work / f"bench-{spectra}.mgf"
    if not fasta.is_file():
        entrapment_fasta(data, proteins, fasta.with_suffix(".tmp"))
        fasta.with_suffix(".tmp").rename(fasta)
    if not mgf.is_file():
        write_mgf(looped_spectra(data, spectra), mgf.with_suffix(".tmp"))
        mgf.with_suffix(".tmp").rename(mgf)
    return fasta, mgf


def psms_at(results: Path, fdr: float = 0.01) -> tuple[int, int]:
    """Rows of an ``rtsearch search`` results TSV, and its target PSMs with ``q_value <= fdr``."""
    import pyarrow.csv as pacsv

    t = pacsv.read_csv(results, parse_options=pacsv.ParseOptions(delimiter="\t"),
                       convert_options=pacsv.ConvertOptions(include_columns=["is_decoy", "q_value"]))  # fmt: skip
    decoy = t["is_decoy"].to_numpy(zero_copy_only=False)
    q = t["q_value"].to_numpy(zero_copy_only=False)
    return t.num_rows, int(((decoy == False) & (q <= fdr)).sum())  # noqa: E712 (bools, or "true"/"false" parsed)
