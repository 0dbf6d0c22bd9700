"""The Poisson feature's cost: `features.poisson_evidence` against the expression it replaced, same inputs.

`plain` is that expression (five [S, 60] temporaries); `poisson_evidence` does the same arithmetic in one array, in
place. Both on seeded matched-ion counts and expectations, interleaved, best of ``--repeat`` (µs):

    python bench/poisson_probe.py [--sizes 256,2048] [--repeat 30]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rtsearch.scoring.database.features import _LOG_FACTORIAL, poisson_evidence  # noqa: E402


def plain(matched: np.ndarray, expected: np.ndarray, terms: int = 60) -> np.ndarray:
    """`poisson_evidence` as one expression (what it was before 2026-11-29): the reference it must equal."""
    k = np.minimum(matched[:, None] + np.arange(terms)[None, :], _LOG_FACTORIAL.shape[0] - 1)
    lam = np.maximum(expected, 1e-12)[:, None]
    logp = k * np.log(lam) - lam - _LOG_FACTORIAL[k]
    top = logp.max(axis=1, keepdims=True)
    log_tail = top[:, 0] + np.log(np.exp(logp - top).sum(axis=1))
    return np.maximum(-log_tail / np.log(10.0), 0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256,2048")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for n in (int(x) for x in args.sizes.split(",")):
        matched, expected = rng.integers(0, 40, n), rng.uniform(0.1, 20.0, n)
        best = {"expression": np.inf, "in place": np.inf}
        for _ in range(args.repeat):
            for name, f in (("expression", plain), ("in place", poisson_evidence)):
                t0 = time.perf_counter()
                f(matched, expected)
                best[name] = min(best[name], time.perf_counter() - t0)
        print(f"{n:5d} spectra: " + ", ".join(f"{k} {v * 1e6:.1f} µs" for k, v in best.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
