"""What naming a batch's matches costs (ProForma and protein accessions, `rtsearch.search.live.named`).

The daemon's engine process names every scored spectrum's best match before the batch goes back. Here the
demo index and `bench/shell_probe.py`'s `InstantEngine` (seeded random peptides: ~40 % with a variable
modification) give a batch of ``--batch`` matches; each step is timed over ``--repeat`` runs (median, ms), and
a digest of the names lets two checkouts' outputs be compared (another checkout first on ``PYTHONPATH``: that
one is measured).

    python bench/naming_probe.py [--batch 4096] [--repeat 30]
    PYTHONPATH=.gpudata/base python bench/naming_probe.py   # another checkout's rtsearch (git archive)
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # appended: a checkout named first on PYTHONPATH is the one measured

import numpy as np  # noqa: E402

from bench.shell_probe import InstantEngine  # noqa: E402
from rtsearch.batch import SpectraBatch  # noqa: E402
from rtsearch.cli.demo import RUN, bundled, cached_index, default_cache  # noqa: E402
from rtsearch.config import SearchConfig  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.search.database import DatabaseTarget  # noqa: E402
from rtsearch.search.live import named  # noqa: E402


def median_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    index, _ = cached_index(default_cache())
    target = DatabaseTarget(index, SearchConfig(), engine=InstantEngine(index, SearchConfig(), get_backend("numpy")))
    spectra = list(read_spectra(bundled(RUN)))
    scored = target.score(SpectraBatch.of((spectra * (args.batch // len(spectra) + 1))[: args.batch]))
    ids = scored.best.match
    modified = float((np.asarray(index.forms.mod_pos[ids]) >= 0).any(axis=1).mean())
    pep_ms, peptides = median_ms(lambda: target.peptides(ids), args.repeat)
    prot_ms, proteins = median_ms(lambda: target.proteins(ids), args.repeat)

    def name() -> Any:
        scored.names = None
        return named(target, scored)

    named_ms, _ = median_ms(name, args.repeat)
    digest = hashlib.sha256(repr((peptides, [list(p) for p in proteins])).encode()).hexdigest()[:16]
    print(f"code {Path(sys.modules['rtsearch'].__file__).parents[1]}: {args.batch} matches ({modified:.0%} modified): "
          f"ProForma {pep_ms:.2f} ms, accessions {prot_ms:.2f} ms, named {named_ms:.2f} ms; names digest {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
