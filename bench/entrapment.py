"""An entrapment check anyone can run: are rtsearch's 1 % really 1 %? (issue 17)

For each dev run (`tests/devruns.py`: BSA1, Ecoli_MS2_small, demo, SmallCalibratible_Yeast) the run's
database gets a 1:1 entrapment: every protein again, its residues shuffled (one ``random.Random(20240531)``
over the proteins in file order), headed ``ENTRAP_<header>``. The combined database is indexed (its decoys
made as usual), the run searched with `rtsearch search` (NumPy), and the accepted target PSMs at q ≤ 0.01
counted with those whose proteins are all entrapment ones. Estimated false discovery proportion, the
combined estimator with r = 1 (Wen et al. 2025, "Assessment of false discovery rate control in
tandem mass spectrometry analysis using entrapment"): FDP ≈ N_entrapment × (1 + 1/r) / N_accepted; estimated
true PSMs = N_accepted − 2 × N_entrapment. Prints one JSON line per run and one pooled.

``--engine sage``: the same combined databases searched by Sage instead (`bench/peers.py`'s worker: sagepy's
wheels in ``--peers-dir``, its other dependencies, pandas and tqdm, importable), each run's spectra as read by
rtsearch written to MGF (a spectrum with several charges, or none, without a CHARGE line: Sage tries the range
of those charges, rtsearch's default charges for none), rtsearch's default digest (`tests.devruns.DATABASE`,
checked against peers.py's; Sage does not clip a protein's N-terminal methionine), the run's tolerances and
rtsearch's isotope errors. Counted three ways, per run and pooled (``"engine"`` in each line): ``sage-lda``,
Sage's own q-values of its LDA discriminant ((decoys + 1) / targets: below 100 targets none is ≤ 0.01);
``sage-lda-tdc``, the same discriminant competed as rtsearch competes its scores (decoys / targets,
`rtsearch.search.fdr.q_values`); ``sage-hyperscore``, the hyperscore competed that way.

    python bench/entrapment.py --data ../shared/data [--runs BSA1,demo] [--work DIR] [--search-args ...] [--jobs N]
    python bench/entrapment.py --data ../shared/data --engine sage --peers-dir DIR [--threads N] [--work DIR]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import dataclasses
import json
import multiprocessing
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyteomics import fasta  # noqa: E402

from rtsearch.cli import main as rtsearch  # noqa: E402
from rtsearch.config import SearchConfig  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.types import Tolerance  # noqa: E402
from tests.devruns import DATABASE, DEV_RUNS, DevRun  # noqa: E402

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


def count(results: Path, level: float = 0.01, column: str = "q_value") -> dict[str, Any]:
    """Accepted target PSMs at ``column`` ≤ ``level`` in a results file, those of entrapment proteins only."""
    accepted = entrapment = 0
    with open(results, newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row[column] == "" or row["is_decoy"] == "true" or float(row[column]) > level:
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
    return {"run": dev.name, **count(out)}


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


def check_sage(dev: DevRun, data: Path, work: Path, peers_dir: Path, threads: int) -> list[dict[str, Any]]:
    """The run searched by Sage (`bench.peers.run_sage`) against its database and entrapment, counted three ways."""
    from bench.bulk_bench import write_mgf
    from bench.peers import SETTINGS, run_sage

    d = DATABASE
    digest = (d.enzyme, d.specificity, d.missed_cleavages, [d.min_length, d.max_length], [d.min_mass, d.max_mass],
              d.fixed_mods, d.variable_mods, d.max_variable_mods)  # fmt: skip
    if digest != ("trypsin", "full", SETTINGS["missed_cleavages"], SETTINGS["length"], SETTINGS["mass_da"],
                  ("Carbamidomethyl@C",), ("Oxidation@M",), 2):  # fmt: skip
        raise SystemExit(f"rtsearch's default digest {digest} is not the one bench/peers.py gives Sage")
    _, combined = combined_fasta(dev, data, work)
    cfg = SearchConfig()
    spectra = [sp for sp in read_spectra(dev.paths(data)[1]) if not sp.problem and sp.precursor_mz > 0]
    # a spectrum of several charges (or none) goes without a CHARGE line (write_mgf writes charges[0]: 0 marks the
    # line to drop), and Sage tries its charge range there: the range of what rtsearch tries on those spectra
    charges = sorted({z for sp in spectra if len(sp.charges) != 1 for z in sp.charges or cfg.charges}) or cfg.charges
    mgf = work / f"{dev.name}.sage.mgf"
    write_mgf([sp if len(sp.charges) == 1 else dataclasses.replace(sp, charges=(0,)) for sp in spectra], mgf)
    mgf.write_text(mgf.read_text().replace("CHARGE=0+\n", ""))
    tol = {k: Tolerance.parse(v) for k, v in (("precursor", dev.precursor), ("fragment", dev.fragment))}
    search = {**{k: [t.value, t.unit] for k, t in tol.items()}, "charges": [charges[0], charges[-1]],
              "isotope_errors": [min(cfg.isotope_errors), max(cfg.isotope_errors)]}  # fmt: skip
    psms = work / f"{dev.name}.sage.tsv"
    res = run_sage(peers_dir, combined, mgf, work, threads, search=search, psms=psms)
    info = {k: res[k] for k in ("spectra", "spectra_with_psm", "lda_fitted", "rt_model", "search")}
    return [{"run": dev.name, "engine": "sage-lda", **count(psms), **info},
            {"run": dev.name, "engine": "sage-lda-tdc", **count(psms, column="q_lda")},
            {"run": dev.name, "engine": "sage-hyperscore", **count(psms, column="q_hyperscore")}]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--runs", default=",".join(d.name for d in DEV_RUNS))
    ap.add_argument("--work", type=Path, help="keep databases, indexes and results here (default: a temp folder)")
    ap.add_argument("--search-args", default="", help="extra `rtsearch search` arguments")
    ap.add_argument("--engine", choices=["rtsearch", "sage"], default="rtsearch")
    ap.add_argument("--peers-dir", type=Path, default=ROOT / ".gpudata/peers", help="sagepy's wheels (bench/peers.py)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="Sage's threads")
    ap.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4),
                    help="rtsearch: index builds and searches side by side (processes)")  # fmt: skip
    args = ap.parse_args()
    if args.engine == "sage" and args.search_args:
        ap.error("--search-args is for --engine rtsearch")
    runs = [d for d in DEV_RUNS if d.name in args.runs.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = (args.work or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        if args.engine == "sage":
            lines = [x for d in runs for x in check_sage(d, args.data, work, args.peers_dir.resolve(), args.threads)]
        else:
            lines = check_all(runs, args.data.resolve(), work, args.search_args.split(), args.jobs)
    for line in [*lines, *pooled(lines)]:
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
