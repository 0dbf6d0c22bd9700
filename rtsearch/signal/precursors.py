"""MS1 elution of MS2 precursors: each precursor's feature (`rtsearch.signal.features`), its apex RT and area.

A precursor (m/z, charge, MS2 retention time) belongs to a feature of its charge when its m/z is within ``ppm``
of one of the feature's isotopes (m/z + k × 1.003355 / z, k = 0 … isotopes − 1: instruments often pick the
most intense isotope, not the monoisotopic one) and its RT lies within the feature's borders widened by
``slack`` seconds (an MS2 can be acquired in a peak's tail); among several, the largest whose borders hold the
MS2's time, else the one whose apex is nearest in RT. A feature cut off by the run's start or end (``open``) has no
apex to give: NaN, its area as far as it was seen.
"""

from __future__ import annotations

import numpy as np

from rtsearch.signal.features import ISOTOPE_DA


def precursor_elution(cols: dict[str, np.ndarray], mz: np.ndarray, charge: np.ndarray, rt: np.ndarray, *,
                      ppm: float = 10.0, slack: float = 10.0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(apex RT, area) of each precursor's feature (NaN where none; see the module docstring)."""
    n = mz.shape[0]
    apex, area = np.full(n, np.nan), np.full(n, np.nan)
    best = np.full(n, np.inf)
    fz, iso = cols["charge"], cols["isotopes"]
    for k in range(int(iso.max(initial=0))):
        has = (iso > k) & (fz > 0)
        peak_mz = np.where(has, cols["mz"] + k * ISOTOPE_DA / np.maximum(fz, 1), np.inf)
        order = np.argsort(peak_mz)
        sorted_mz = peak_mz[order]
        lo = np.searchsorted(sorted_mz, mz * (1 - ppm * 1e-6))
        hi = np.searchsorted(sorted_mz, mz * (1 + ppm * 1e-6), side="right")
        for i in np.flatnonzero(hi > lo).tolist():
            cand = order[lo[i] : hi[i]]
            cand = cand[(fz[cand] == charge[i]) & (cols["rt_start"][cand] - slack <= rt[i])
                        & (cols["rt_end"][cand] + slack >= rt[i])]  # fmt: skip
            if cand.size == 0:
                continue
            held = (cols["rt_start"][cand] <= rt[i]) & (cols["rt_end"][cand] >= rt[i])
            # a feature whose borders hold the MS2 (the largest), before one within the slack (the nearest apex)
            rank = np.where(held, -cols["area"][cand], np.abs(cols["rt_apex"][cand] - rt[i]) + 1e300)
            j = int(np.argmin(rank))
            if rank[j] < best[i]:
                best[i], apex[i], area[i] = rank[j], cols["rt_apex"][cand[j]], cols["area"][cand[j]]
                if "open" in cols and cols["open"][cand[j]]:
                    apex[i] = np.nan
    return apex, area
