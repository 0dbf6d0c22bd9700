"""A simulated top-down spectrum of a known proteoform, for tests: a seeded choice of cleavages (b and y ions
alternately, 40 at most), one mass shift after a random residue of the middle half, and 40 noise masses."""

from __future__ import annotations

import numpy as np

from rtsearch.scoring.topdown.prm import WATER
from rtsearch.types import DeconvolutedSpectrum, Precursor


def simulate(db, form: int, shift: float, rng: np.random.Generator, prefix: np.ndarray | None = None,
             site: int | None = None) -> DeconvolutedSpectrum:  # fmt: skip
    """The spectrum of ``db``'s form ``form`` (or of the proteoform of prefix masses ``prefix``) with ``shift`` Da
    on residue ``site + 1`` (0-based: ``site + 1``; default a random one of the middle half)."""
    prefix = db.form_prefix(form) if prefix is None else prefix
    n = len(prefix) - 1
    site = int(rng.integers(n // 4, 3 * n // 4)) if site is None else site
    true = prefix + np.where(np.arange(n + 1) > site, shift, 0.0)
    precursor = true[-1] + WATER
    cut = np.sort(rng.choice(np.arange(1, n), min(40, n - 1), replace=False))
    b, y = true[cut[::2]], precursor - true[cut[1::2]]
    noise = rng.uniform(300, precursor - 300, 40)
    mass = np.sort(np.concatenate([b, y, noise]))
    return DeconvolutedSpectrum("sim", 1, 2, mass, np.ones(len(mass), np.float32), np.ones(len(mass), np.int16),
                                (Precursor(precursor),), activation="HCD")  # fmt: skip
