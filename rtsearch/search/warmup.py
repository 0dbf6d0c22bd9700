"""Spectra to warm an engine up with before intake opens: every code path, no real data needed.

CuPy compiles kernels on first use (seconds each on a fresh machine). Spectra made of
index peptides' own fragment m/z reach candidates, full scoring and features, with
known, unknown and several charges; a few odd ones (no peaks, too few, more than a
batch row holds, no candidate) take the other branches.
"""

from __future__ import annotations

import numpy as np

from rtsearch.scoring.database.engine import Engine
from rtsearch.types import PROTON, Spectrum


def warm_up_spectra(engine: Engine, n: int) -> list[Spectrum]:
    """``n`` spectra made of index peptides' own fragment m/z (plus seeded noise), charges varied."""
    rng = np.random.default_rng(0)
    index = engine.index
    n_pep = len(engine.peptide_mass)
    if n_pep == 0:
        return [Spectrum("warm-up", 0, 2, np.array([200.0, 300.0]), np.ones(2, np.float32), 500.0, (2,))]
    chosen = np.unique(rng.integers(0, n_pep, n))
    pick = np.zeros(n_pep, dtype=bool)
    pick[chosen] = True
    frags = index.fragments
    hit = np.flatnonzero(pick[frags.peptide])
    by_pep: dict[int, list[float]] = {}
    for p, mz in zip(frags.peptide[hit].tolist(), frags.mz[hit].tolist(), strict=True):
        by_pep.setdefault(p, []).append(mz)
    charges: tuple[tuple[int, ...], ...] = ((2,), (), (2, 3), (3,))
    out = []
    for k, p in enumerate(chosen.tolist()):
        mz = np.sort(np.concatenate([np.asarray(by_pep.get(p, []), np.float64), rng.uniform(150, 1500, 40)]))
        inten = np.asarray(rng.uniform(10, 100, mz.shape[0]), dtype=np.float32)
        z = charges[k % len(charges)]
        prec = (float(engine.peptide_mass[p]) + (z[0] if z else 2) * PROTON) / (z[0] if z else 2)
        out.append(Spectrum("warm-up", k, 2, mz, inten, prec, z))
    # the odd ones real runs bring: no peaks, too few, more than a batch row holds, no candidate, 4+
    big = np.sort(rng.uniform(150, 2000, 5000))
    out[1::16] = [
        Spectrum("warm-up", 10_001, 2, np.zeros(0), np.zeros(0, np.float32), 600.0, (2,)),
        Spectrum("warm-up", 10_002, 2, big[:3], np.ones(3, np.float32), 700.0, ()),
        Spectrum("warm-up", 10_003, 2, big, rng.uniform(1, 9, 5000).astype(np.float32), 800.0, (3,)),
        Spectrum("warm-up", 10_004, 2, big[::50], np.ones(100, np.float32), 99_999.0, (4,)),
    ][: len(out[1::16])]
    return out
