"""The entrapment check (are rtsearch's 1 % really 1 %?): tests/e2e/test_entrapment.py asserts it on the dev runs,
`bench/entrapment.py` prints it (and Sage's beside).

Each dev run's database gets a 1:1 entrapment: every protein again, its residues shuffled (one
``random.Random(20240531)`` over the proteins in file order), headed ``ENTRAP_<header>``. The combined database is
indexed (its decoys made as usual), the run searched with ``rtsearch search`` (NumPy), and the accepted target PSMs
at q ≤ 0.01 counted with those whose proteins are all entrapment ones: by the file's q-values ((decoys + 1) /
targets: none on these runs, each under 100 confident matches), at q ≤ 0.05 by them, and at q ≤ 0.01 by decoys /
targets recomputed from the file's scores (``plain``, as these counts were before the +1). Estimated false
discovery proportion, the combined estimator with r = 1 (Wen et al. 2025, "Assessment of false discovery rate
control in tandem mass spectrometry analysis using entrapment"): FDP ≈ N_entrapment × (1 + 1/r) / N_accepted;
estimated true PSMs = N_accepted − 2 × N_entrapment. `replay` counts the same of the running q-values
(`rtsearch.search.live`, identified at 5 %): a run's scored spectra fed to a `LiveRun` a few at a time in scan
order, as a daemon at a few hundred a second sees them.
"""

from __future__ import annotations

import concurrent.futures
import csv
import multiprocessing
import random
from pathlib import Path
from typing import Any

import numpy as np
from pyteomics import fasta

from rtsearch.batch import SpectraBatch
from rtsearch.cli import main as rtsearch
from rtsearch.io.spectra import read_spectra
from rtsearch.matches import STATUSES, ScoredBatch
from rtsearch.scoring.backend import get_backend
from rtsearch.search import live
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.fdr import q_values
from tests.devruns import DEV_RUNS, DevRun

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


def estimate(accepted: int, entrapment: int) -> dict[str, Any]:
    """The counts and the estimates of FDP and true PSMs (r = 1)."""
    return {"accepted": accepted, "entrapment": entrapment,
            "fdp": round(2 * entrapment / accepted, 4) if accepted else 0.0,
            "true_estimate": accepted - 2 * entrapment}  # fmt: skip


def count(results: Path, level: float = 0.01, column: str = "q_value", *, plain: bool = False) -> dict[str, Any]:
    """Accepted target PSMs at ``column`` ≤ ``level`` in a results file, those of entrapment proteins only;
    ``plain``: q recomputed from the file's ``score`` as decoys / targets instead."""
    with open(results, newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r[column] != ""]
    if plain:
        score = np.array([float(r["score"]) for r in rows])
        q = q_values(score, np.array([r["is_decoy"] == "true" for r in rows]), plus_one=False).tolist()
    else:
        q = [float(r[column]) for r in rows]
    accepted = entrapment = 0
    for row, qv in zip(rows, q, strict=True):
        if row["is_decoy"] == "true" or qv > level:
            continue
        accepted += 1
        entrapment += all(p.startswith(PREFIX) for p in row["proteins"].split(";"))
    return estimate(accepted, entrapment)


def pooled(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One pooled line per engine of ``lines`` (lines without ``"engine"``: rtsearch's)."""
    engines = list(dict.fromkeys(x.get("engine") for x in lines))
    out = []
    for engine in engines:
        mine = [x for x in lines if x.get("engine") == engine]
        label = {"engine": engine} if engine else {}
        out.append({"run": "pooled", **label, **estimate(sum(x["accepted"] for x in mine),
                                                         sum(x["entrapment"] for x in mine))})  # fmt: skip
    return out


def combined_fasta(dev: DevRun, data: Path, work: Path) -> tuple[str, Path]:
    """The run's database and its entrapment written in ``work``; the databases' key (names the index too)."""
    key = "+".join(Path(f).stem for f in dev.fastas)
    combined = work / f"entrap-{key}.fasta"
    entrapment_fasta(dev.paths(data)[0], combined)
    return key, combined


def index_of(dev: DevRun, data: Path, work: Path) -> Path:
    """The index of the run's database and its entrapment, in ``work`` (built unless there)."""
    key, combined = combined_fasta(dev, data, work)
    folder = work / f"idx-{key}"
    if not folder.is_dir() and rtsearch(["index", "build", "--fasta", str(combined), "--out", str(folder)]) != 0:
        raise SystemExit(f"index build failed for {dev.fastas}")
    return folder


def check(dev: DevRun, data: Path, work: Path, indexes: dict[tuple[str, ...], Path], extra: list[str]) -> dict:
    run = dev.paths(data)[1]
    if dev.fastas not in indexes:
        indexes[dev.fastas] = index_of(dev, data, work)
    toml = work / f"{dev.name}.toml"
    toml.write_text(f'[search]\nprecursor_tolerance = "{dev.precursor}"\nfragment_tolerance = "{dev.fragment}"\n')
    out = work / f"{dev.name}.tsv"
    code = rtsearch(["search", str(run), "--index", str(indexes[dev.fastas]), "--config", str(toml),
                     "--backend", "numpy", "-o", str(out), *extra])  # fmt: skip
    if code != 0:
        raise SystemExit(f"search failed for {dev.name}")
    return {"run": dev.name, **count(out), "at_5pct": count(out, 0.05), "plain": count(out, plain=True)}


def check_all(runs: list[DevRun], data: Path, work: Path, extra: list[str], jobs: int) -> list[dict]:
    """`check` of each run, ``jobs`` processes side by side: the distinct indexes first (runs sharing a database
    share its index), then the searches; lines in the order of ``runs``."""
    first = list({d.fastas: d for d in runs}.values())
    if jobs <= 1:
        indexes: dict[tuple[str, ...], Path] = {}
        return [check(d, data, work, indexes, extra) for d in runs]
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        builds = {d.fastas: pool.submit(index_of, d, data, work) for d in first}
        built = {k: f.result() for k, f in builds.items()}
        searches = [pool.submit(check, d, data, work, built, extra) for d in runs]
        return [f.result() for f in searches]


IDENTIFIED = STATUSES.index("identified")


def replay(target: DatabaseTarget, scored: ScoredBatch, batch: int, ridge: float,
           prefix: str = PREFIX, identified_at: float = 0.05) -> tuple[int, int]:  # fmt: skip
    """Live-identified targets and those of entrapment proteins only, ``scored`` fed ``batch`` spectra at a time."""
    run = live.LiveRun("run", target, refits="inline", identified_at=identified_at)
    run.ridge = ridge
    accepted = entrapment = 0
    for start in range(0, len(scored), batch):
        res = run.add_scored(scored.take(np.arange(start, min(start + batch, len(scored)))))
        rows = {r: j for j, r in enumerate(np.flatnonzero(res.matched).tolist())}  # names are of matched rows
        hits = np.flatnonzero(res.status == IDENTIFIED).tolist()
        accepted += len(hits)
        entrapment += sum(all(p.startswith(prefix) for p in res.proteins[rows[k]] or [""]) for k in hits)
    return accepted, entrapment


def scored_runs(data: Path, work: Path) -> list[tuple[str, DatabaseTarget, ScoredBatch]]:
    """Each dev run's name, its entrapment target (NumPy) and its MS2 spectra scored in one batch, named."""
    runs = []
    for dev in DEV_RUNS:
        target = DatabaseTarget.open(index_of(dev, data, work), dev.search_config(), get_backend("numpy"))
        spectra = [s for s in read_spectra(dev.paths(data)[1]) if s.ms_level == 2]
        runs.append((dev.name, target, live.named(target, target.score(SpectraBatch.of(spectra)))))
    return runs
