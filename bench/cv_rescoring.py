"""Honest rescoring tried on the dev runs: each PSM scored by discriminants fitted without it (issue 17).

Reads the results files that `rtsearch search` wrote for the four dev runs — with a 1:1 entrapment
(``bench/entrapment.py --work DIR`` leaves them in DIR) and, with ``--plain DIR``, without one (any folder of
``<run>.tsv``) — takes each run's best matches, their reported features, and rescores them offline:

- ``all``: the run's discriminant fitted on every PSM it then ranks (`rtsearch.search.lda.fit`, what
  `rtsearch search` does);
- ``resetS``: RESET (`reset`), decoys split with seed S;
- ``loro``: each run scored by the discriminant fitted on the other three runs' PSMs (none of its own);
- ``cvK xR``: K folds, each scored by `fit` on the other folds, its scores centred and scaled by the decoys that
  model was fitted on (median 0, standard deviation 1: many decoys, where a fold's own 1 % threshold would rest on
  a handful), the split repeated R times with other seeds and each PSM's scores averaged (Granholm et al. 2012;
  Percolator's and mokapot's scheme with another calibration);

each at every ridge of ``--ridges`` (`rtsearch.search.lda.RIDGE`, the within-class scatter's shrinkage), and
counts per run and pooled: accepted target PSMs at q ≤ 0.01 / those matching entrapment proteins only, estimated
FDP = 2 × entrapment / accepted, estimated true = accepted − 2 × entrapment. The reported features are the
calibrated ones of the run's end, so ``all`` at the shipped ridge reproduces `rtsearch search`'s counts.

    python bench/entrapment.py --data ../shared/data --work /tmp/entrapw
    python bench/cv_rescoring.py --entrapment /tmp/entrapw [--plain DIR] [--ridges 0.001,0.1,1]
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rtsearch.scoring.database.features import FEATURES  # noqa: E402
from rtsearch.search import lda  # noqa: E402
from rtsearch.search.fdr import q_values  # noqa: E402
from tests.devruns import DEV_RUNS  # noqa: E402

Run = tuple[np.ndarray, np.ndarray, np.ndarray]  # features, decoy, entrapment-only
Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]
PRIMARY = "hyperscore"


def load(path: Path) -> Run:
    """A results file's best matches: features as fitted (|ppm| for the calibrated error), decoy, entrapment-only."""
    with path.open() as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["rank"] == "1" and r["peptide"]]
    x = np.array([[float(r[f]) if r[f] not in ("", "nan") else 0.0 for f in FEATURES] for r in rows])
    z2 = FEATURES.index("ppm_error_z2")
    x[:, z2] = np.abs(x[:, z2])
    decoy = np.array([r["is_decoy"] == "true" for r in rows])
    entrapment = np.array([all(p.startswith("ENTRAP_") for p in r["proteins"].split(";")) for r in rows])
    return x, decoy, entrapment


def fit_on_all(x: np.ndarray, decoy: np.ndarray) -> np.ndarray:
    return lda.fit(x, decoy, FEATURES, start=PRIMARY).score(x)


def cross_validated(folds: int, repeats: int) -> Scorer:
    def score(x: np.ndarray, decoy: np.ndarray) -> np.ndarray:
        n, out = len(x), np.zeros(len(x))
        for r in range(repeats):
            fold = np.random.default_rng(r).permutation(n) % folds
            for f in range(folds):
                test, train = fold == f, fold != f
                model = lda.fit(x[train], decoy[train], FEATURES, start=PRIMARY)
                ref = model.score(x[train][decoy[train]])
                out[test] += (model.score(x[test]) - np.median(ref)) / max(float(np.std(ref)), 1e-12)
        return out / repeats

    return score


def reset(seed: int) -> Scorer:
    """RESET (Freestone, Käll, Noble & Keich, "How to train a post-processor for tandem mass spectrometry proteomics
    database search while maintaining control of the false discovery rate", J. Proteome Res.,
    doi:10.1021/acs.jproteome.4c00742): half the decoys, drawn at random, train the discriminant as its
    negatives, the other half join the targets unlabelled; the training half is then dropped and the estimating
    half, never seen as decoys, estimates the FDR counted twice (2 × decoys / targets). Returns scores with the
    training decoys NaN (`count` reads a NaN decoy as dropped, and counts the rest's decoys twice)."""

    def score(x: np.ndarray, decoy: np.ndarray) -> np.ndarray:
        train = decoy & (np.random.default_rng(seed).random(len(x)) < 0.5)
        out = lda.fit(x, train, FEATURES, start=PRIMARY).score(x)
        out[train] = np.nan
        return out

    score.reset = True  # type: ignore[attr-defined]
    return score


def q_twice(s: np.ndarray, decoy: np.ndarray) -> np.ndarray:
    """q-values with each decoy counted twice (`reset`'s estimate; NaN rows, the dropped, at q = 1)."""
    return np.minimum(2 * q_values(s, decoy), 1.0)


def other_runs(runs: dict[str, Run]) -> dict[str, np.ndarray]:
    """``loro``: each run scored by the discriminant fitted on the other runs' PSMs (none of its own)."""
    out = {}
    for name, (x, _, _) in runs.items():
        xs = [r[0] for k, r in runs.items() if k != name]
        ds = [r[1] for k, r in runs.items() if k != name]
        out[name] = lda.fit(np.concatenate(xs), np.concatenate(ds), FEATURES, start=PRIMARY).score(x)
    return out


def count(runs: dict[str, Run], scorer: Scorer | None) -> tuple[str, int, int]:
    """Per run "accepted/entrapment", and the pooled accepted and entrapment (``scorer`` None: `other_runs`)."""
    cells, accepted, entrapped = [], 0, 0
    scored = other_runs(runs) if scorer is None else {}
    for name, (x, decoy, entrapment) in runs.items():
        s = scored[name] if scorer is None else scorer(x, decoy)
        q = q_twice(s, decoy) if getattr(scorer, "reset", False) else q_values(s, decoy)
        ok = (q <= 0.01) & ~decoy & np.isfinite(s)
        a, e = int(ok.sum()), int((ok & entrapment).sum())
        cells.append(f"{a}/{e}")
        accepted, entrapped = accepted + a, entrapped + e
    return " ".join(cells), accepted, entrapped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entrapment", type=Path, required=True, help="bench/entrapment.py's --work folder")
    ap.add_argument("--plain", type=Path, help="the dev runs' results files searched without entrapment")
    ap.add_argument("--ridges", default="0.001,0.1,1")
    ap.add_argument("--schemes", default="all,loro,cv5x5", help="all, loro (leave one run out), a feature "
                    "alone (hyperscore) or cvKxR (K folds, R repeats)")  # fmt: skip
    ap.add_argument("--unfitted", default="", help="feature sets left out of the fit, ';' between sets, ',' "
                    "between names (each set a row of every ridge and scheme; '' : the shipped fit)")  # fmt: skip
    args = ap.parse_args()
    shipped = lda.NOT_FITTED
    sets = {"entrapment": args.entrapment, **({"plain": args.plain} if args.plain else {})}
    data = {k: {d.name: load(folder / f"{d.name}.tsv") for d in DEV_RUNS} for k, folder in sets.items()}
    print("| ridge | left out | scheme | " + " | ".join(
        f"{k}: pooled accepted / entrapment, est. FDP, est. true; per run" for k in sets) + " |")  # fmt: skip
    print("|---|---|---|" + "---|" * len(sets))
    for ridge, unfitted, scheme in ((float(r), u, sc) for r in args.ridges.split(",")
                                    for u in args.unfitted.split(";") for sc in args.schemes.split(",")):
        lda.RIDGE = ridge
        lda.NOT_FITTED = shipped | {n for n in unfitted.split(",") if n}
        scorer: Scorer | None
        if scheme == "all":
            scorer = fit_on_all
        elif scheme == "loro":
            scorer = None
        elif scheme.startswith("reset"):  # reset<seed>
            scorer = reset(int(scheme[5:] or 0))
        elif scheme in FEATURES:  # one feature alone, e.g. the primary score
            scorer = (lambda col: lambda x, _: x[:, col])(FEATURES.index(scheme))
        else:
            k, r = scheme[2:].split("x")
            scorer = cross_validated(int(k), int(r))
        cells = []
        for runs in data.values():
            per_run, a, e = count(runs, scorer)
            cells.append(f"{a} / {e}, {2 * e / max(a, 1):.1%}, {a - 2 * e}; {per_run}")
        print(f"| {ridge:g} | {unfitted or '-'} | {scheme} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
