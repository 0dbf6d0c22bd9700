"""Chromatographic peaks matched across engines: what the OpenMS comparison (tests/unit/test_signal_vs_openms.py,
`bench/ms1_signal.py --openms`) counts as the same peak."""

from __future__ import annotations

import numpy as np


def match(theirs: np.ndarray, mine: np.ndarray, ppm: float) -> np.ndarray:
    """For each of OpenMS's peaks (rows: m/z, RT min, RT max, area, FWHM), the index of the most intense of
    rtsearch's (rows: m/z, apex RT, area, FWHM) within ``ppm`` of its m/z with its apex inside its RT borders; -1:
    none."""
    order = np.argsort(mine[:, 0])
    mz = mine[order, 0]
    out = np.full(theirs.shape[0], -1, np.int64)
    for k, (m, lo_rt, hi_rt, _, _) in enumerate(theirs.tolist()):
        a, b = np.searchsorted(mz, [m * (1 - ppm * 1e-6), m * (1 + ppm * 1e-6)], side="left")
        cand = order[a:b]
        cand = cand[(mine[cand, 1] >= lo_rt) & (mine[cand, 1] <= hi_rt)]
        if cand.size:
            out[k] = cand[np.argmax(mine[cand, 2])]
    return out
