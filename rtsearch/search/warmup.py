"""Warm-up spectra every kind of target adds to its own: the odd ones real runs bring.

CuPy compiles kernels on first use (seconds each on a fresh machine), so a target
warms up on spectra that take every scoring path before the daemon opens intake: its
own entries' peaks (each kind makes those), plus, from here, a spectrum with no
peaks, one with too few, one with more than a batch row holds and one whose
precursor matches nothing, at charges known, unknown and 3+/4+.
"""

from __future__ import annotations

import numpy as np

from rtsearch.types import Spectrum

RUN = "warm-up"
ODD_EVERY = 16  # every 16th warm-up spectrum, from the second on, is an odd one


def placeholder() -> list[Spectrum]:
    """The warm-up of an empty target: one plain spectrum."""
    return [Spectrum(RUN, 0, 2, np.array([200.0, 300.0]), np.ones(2, np.float32), 500.0, (2,))]


def with_odd_ones(spectra: list[Spectrum], rng: np.random.Generator) -> list[Spectrum]:
    """``spectra`` with every `ODD_EVERY`-th one, from the second on, replaced by an odd one (as many as fit)."""
    big = np.sort(rng.uniform(150, 2000, 5000))
    odd = [
        Spectrum(RUN, 10_001, 2, np.zeros(0), np.zeros(0, np.float32), 600.0, (2,)),  # no peaks
        Spectrum(RUN, 10_002, 2, big[:3], np.ones(3, np.float32), 700.0, ()),  # too few
        Spectrum(RUN, 10_003, 2, big, rng.uniform(1, 9, 5000).astype(np.float32), 800.0, (3,)),  # over a row
        Spectrum(RUN, 10_004, 2, big[::50], np.ones(100, np.float32), 99_999.0, (4,)),  # no candidate
    ]
    out = list(spectra)
    for at, sp in zip(range(1, len(out), ODD_EVERY), odd, strict=False):
        out[at] = sp
    return out
