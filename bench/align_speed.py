"""The top-down alignment's NumPy reference against an earlier commit's: the same scores, and each one's time.

Random proteoforms (prefix masses of 2–60 residues), their PRMs with a shift on about half, noise PRMs and an end
off by up to a Da; tolerances, shift counts and known shifts drawn as well (seeded). Each case is aligned by this
checkout's `rtsearch.scoring.topdown.align.align` and by the one of ``--base`` (read with ``git show``); any score
that differs stops the run.

    python bench/align_speed.py --base bd9e311 [--cases 1500] [--seed 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtsearch.scoring.topdown import align as current  # noqa: E402


def _base(rev: str, folder: Path) -> object:
    """The module ``align.py`` as it was at ``rev``."""
    path = folder / "align_base.py"
    path.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:rtsearch/scoring/topdown/align.py"],
                                   check=True, capture_output=True, text=True).stdout)  # fmt: skip
    spec = importlib.util.spec_from_file_location("align_base", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["align_base"] = module  # (its dataclass looks its module up)
    spec.loader.exec_module(module)
    return module


def case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict[str, object]]:
    """A spectrum's PRMs, a proteoform's prefix masses and `align`'s options."""
    n, m = int(rng.integers(2, 60)), int(rng.integers(1, 50))
    prefix = np.concatenate([[0.0], np.cumsum(rng.uniform(57, 186, n - 1))])
    shift = float(rng.choice([0.0, 79.966, -18.01, 14.0, 250.0]))
    take = np.sort(rng.choice(np.arange(1, n), size=min(m, n - 1), replace=False))
    prm = prefix[take] + np.where(rng.random(take.size) < 0.5, shift, 0.0) + rng.normal(0, 0.005, take.size)
    end = prefix[-1] + shift + float(rng.normal(0, 0.5))
    prm = np.unique(np.concatenate([[0.0], prm, rng.uniform(0, prefix[-1], int(rng.integers(0, 10))), [end]]))
    prm = np.concatenate([[0.0], prm[(prm > 0) & (prm <= end)]])
    kw: dict[str, object] = dict(tolerance=float(rng.choice([0.01, 0.02, 0.5])), max_shifts=int(rng.integers(0, 3)),
                                 max_shift_mass=float(rng.choice([100.0, 500.0])),
                                 precursor_tolerance=float(rng.choice([0.0, 1.2, 3.0])) or None)  # fmt: skip
    if rng.random() < 0.5:
        kw.update(known=np.array([79.966331, 15.994915, -18.010565][: int(rng.integers(1, 4))]),
                  max_known=int(rng.integers(1, 3)), known_reach=float(rng.choice([80.0, 200.0])))  # fmt: skip
    return prm, prefix, kw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the commit to compare with")
    ap.add_argument("--cases", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    spent = {"base": 0.0, "this": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        base = _base(args.base, Path(tmp))
        for k in range(args.cases):
            prm, prefix, kw = case(rng)
            t = time.perf_counter()
            want = base.align(prm, prefix, **kw).scores  # type: ignore[attr-defined]
            spent["base"] += time.perf_counter() - t
            t = time.perf_counter()
            got = current.align(prm, prefix, **kw).scores
            spent["this"] += time.perf_counter() - t
            if got != want:
                print(f"case {k} differs: {kw}: {args.base} {want}, this {got}")
                return 1
    print(f"{args.cases} cases, the same scores; {args.base} {spent['base']:.2f} s, this {spent['this']:.2f} s "
          f"({spent['base'] / spent['this']:.1f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
