"""Centroiding of profile scans: each profile peak's apex becomes one centroid (m/z and height).

A profile point is a peak's apex when it is higher than the point before and not lower than the point after, and
both neighbours lie within ``max_gap`` Da (points farther apart belong to different peaks: profile data drop the
zeros between peaks). Its centroid m/z is the vertex of the parabola through the logarithms of the three
intensities (a Gaussian's exact apex, the usual Orbitrap estimate), its intensity the Gaussian's height there; an
apex whose neighbours are not both positive keeps its own point. Apexes lower than ``min_fraction`` × the scan's
highest are left out. A scan is profile (`is_profile`) when its points' median spacing is below
``PROFILE_SPACING`` Da: centroided scans of these instruments are 0.3–6 Da apart at the median, profile ones
0.0005–0.002 Da (docs/history/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rtsearch.types import Spectrum

PROFILE_SPACING = 0.05  # Da


def is_profile(sp: Spectrum) -> bool:
    """Whether ``sp``'s points are profile data (see the module docstring)."""
    return sp.mz.shape[0] > 2 and float(np.median(np.diff(sp.mz))) < PROFILE_SPACING


def centroid(mz: np.ndarray, intensity: np.ndarray, *, max_gap: float = 0.05,
             min_fraction: float = 0.0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Centroid m/z and intensity of a profile scan (m/z ascending; see the module docstring)."""
    x, y = np.asarray(mz, np.float64), np.asarray(intensity, np.float64)
    n = x.shape[0]
    if n < 3:
        return x[y > 0], y[y > 0]
    i = np.arange(1, n - 1)
    close = (x[i] - x[i - 1] <= max_gap) & (x[i + 1] - x[i] <= max_gap)
    top = i[(y[i] > y[i - 1]) & (y[i] >= y[i + 1]) & close & (y[i] > 0)]
    cx, cy = x[top].copy(), y[top].copy()
    fit = (y[top - 1] > 0) & (y[top + 1] > 0)
    t = top[fit]
    x0, x1, x2 = x[t - 1], x[t], x[t + 1]
    l0, l1, l2 = np.log(y[t - 1]), np.log(y[t]), np.log(y[t + 1])
    # the parabola through (x0, l0), (x1, l1), (x2, l2): l = a (x - x1)^2 + b (x - x1) + l1
    d0, d2 = x0 - x1, x2 - x1
    a = ((l0 - l1) / d0 - (l2 - l1) / d2) / (d0 - d2)
    b = (l0 - l1) / d0 - a * d0
    ok = a < 0
    shift = np.where(ok, -b / (2 * np.where(ok, a, -1.0)), 0.0)
    shift = np.clip(shift, d0, d2)  # the vertex between the neighbours
    cx[fit] = x1 + shift
    cy[fit] = np.exp(l1 + b * shift + a * shift**2)
    keep = cy >= min_fraction * (cy.max() if cy.size else 0.0)
    return cx[keep], cy[keep]


def centroided(sp: Spectrum, **kw: float) -> Spectrum:
    """``sp`` with its profile points replaced by their centroids."""
    mz, inten = centroid(sp.mz, sp.intensity, **kw)
    return replace(sp, mz=mz, intensity=inten.astype(np.float32))
