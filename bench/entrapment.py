"""An entrapment check anyone can run: are rtsearch's 1 % really 1 %? And Sage's, on the same databases.

For each dev run (`tests/devruns.py`: BSA1, Ecoli_MS2_small, demo, SmallCalibratible_Yeast) the run's database
with a 1:1 shuffled entrapment, searched and counted as `tests.entrapment` says (estimated FDP = 2 × entrapment /
accepted at q ≤ 0.01; estimated true PSMs = accepted − 2 × entrapment), offline and (``--live``) by the running
q-values a daemon answers with. Prints a line per run and one pooled.

``--engine sage``: the same combined databases searched by Sage instead (`bench/peers.py`'s worker: sagepy's
wheels in ``--peers-dir``, its other dependencies, pandas and tqdm, importable), each run's spectra as read by
rtsearch written to MGF (a spectrum with several charges, or none, without a CHARGE line: Sage tries the range
of those charges, rtsearch's default charges for none), rtsearch's default digest (`tests.devruns.DATABASE`,
checked against peers.py's; Sage does not clip a protein's N-terminal methionine), the run's tolerances and
rtsearch's isotope errors. Counted three ways, per run and pooled (``"engine"`` in each line): ``sage-lda``,
Sage's own q-values of its LDA discriminant ((decoys + 1) / targets: below 100 targets none is ≤ 0.01);
``sage-lda-tdc``, the same discriminant competed as rtsearch competes its scores (decoys / targets,
`rtsearch.search.fdr.q_values`); ``sage-hyperscore``, the hyperscore competed that way.

    python3 bench/entrapment.py --data ../shared/data [--runs BSA1,demo] [--work DIR] [--live] [--json F]
    python bench/entrapment.py --data ../shared/data --engine sage --peers-dir DIR [--threads N] [--work DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import emit  # noqa: E402
from rtsearch.config import SearchConfig  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.types import Tolerance  # noqa: E402
from tests.devruns import DATABASE, DEV_RUNS, DevRun  # noqa: E402
from tests.entrapment import check_all, combined_fasta, count, estimate, pooled, replay, scored_runs  # noqa: E402


def check_sage(dev: DevRun, data: Path, work: Path, peers_dir: Path, threads: int) -> list[dict[str, Any]]:
    """The run searched by Sage (`bench.peers.run_sage`) against its database and entrapment, counted three ways."""
    from bench.harness import write_mgf
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
    ap.add_argument("--live", action="store_true", help="rtsearch: the running q-values' counts too")
    ap.add_argument("--json", type=Path)
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
        if args.live and args.engine == "rtsearch":
            lines += [{"run": name, "engine": "rtsearch-live", **estimate(*replay(target, scored, 2, target.ridge))}
                      for name, target, scored in scored_runs(args.data.resolve(), work)]  # fmt: skip
    lines += pooled(lines)
    for line in lines:
        print(f"{line.get('engine', 'rtsearch'):<16}{line['run']:<26}accepted {line['accepted']:>5}  entrapment "
              f"{line['entrapment']:>4}  FDP {line['fdp']:.3f}  true {line['true_estimate']:>5}", flush=True)
    emit({"runs": lines}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
