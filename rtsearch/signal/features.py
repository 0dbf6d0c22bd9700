"""MS1 features: chromatographic peaks grouped into isotope patterns, a run's whole pipeline on NumPy or CuPy.

Pipeline (`detect_features`): profile scans centroided (`rtsearch.signal.centroid`), mass traces
(`rtsearch.signal.traces`) → the uneven-spacing Savitzky–Golay smoother (`rtsearch.signal.smoothing`, or
`rtsearch.signal.gpu` on CuPy) → peaks (`rtsearch.signal.peaks`; a trace is cut where it falls to ``valley`` of the
apexes either side, OpenMS ElutionPeakDetection's half) → isotope patterns. A peak's isotope partner of charge z and
step k is a peak within ``ppm`` of m/z + k × 1.003355 / z whose apex lies within the peak's borders (the nearest in
m/z). Only peaks that elute ``min_duration_s`` at least (OpenMS's minimum trace length, 5 s) and hold a point in
``min_sample_rate`` of the scans they span (OpenMS's minimum sample rate, half: a signal seen in one scan of five is
no elution profile) make features. Peaks are taken by area, largest first: each not yet in a feature tries every
charge — partners up from it (k = 1, 2, …) and down (k = −1 from it, then from that one, …) while free — and the
monoisotopic peak among those below it is the one from which averagine's isotope pattern (`averagine`) explains the
pattern's areas best (the peaks below it are left to other features); the charge with the most peaks wins (then the
better fit, then the lower charge), a lone peak is a feature of charge 0. A feature's m/z is its monoisotopic
peak's, its area the sum of its peaks', its apex, borders and FWHM its largest peak's, its ``quality`` the cosine of
its areas with averagine's (0 for a lone peak). Against OpenMS's FeatureFindingMetabo on the lcms-ms1 runs:
bench/BASELINES.md "MS1 features". ``cols["open"]`` (not written by `rtsearch features`) marks features whose apex
lies on the run's first or last MS1 scan at their trace's end: an elution cut off by the run, its apex not seen.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from rtsearch.database.arrays import ranges
from rtsearch.signal.centroid import centroided, is_profile
from rtsearch.signal.peaks import Peaks, find_peaks
from rtsearch.signal.smoothing import Smoothing, smooth
from rtsearch.signal.traces import MassTraces, Skipped, extract_traces
from rtsearch.types import PROTON

ISOTOPE_DA = 1.0033548  # 13C − 12C
COLUMNS = ("mz", "charge", "isotopes", "rt_apex", "rt_start", "rt_end", "fwhm", "area", "apex_intensity", "quality")


@dataclass(frozen=True)
class FeatureSettings:
    """How MS1 features are found (defaults matched against OpenMS on the lcms-ms1 runs, docs/history/RESULTS.md)."""

    ppm: float = 10.0
    max_gap: int = 5  # scans a trace may miss in a row
    min_points: int = 3  # a trace's and a peak's
    noise: float = 0.0
    smoothing: Smoothing = Smoothing()
    span_s: float = 5.0  # the smoothing window holds at least this many seconds of the run's median MS1 spacing
    min_duration_s: float = 5.0  # a feature's peaks elute this long at least (OpenMS: min_trace_length)
    min_sample_rate: float = 0.5  # … and hold a point in this share of the scans they span (OpenMS: min_sample_rate)
    valley: float = 0.5  # a trace splits into two peaks where it falls this far below both (OpenMS: to half)
    max_charge: int = 6
    max_isotopes: int = 6
    centroid: Literal["auto", "yes", "no"] = "auto"  # profile scans to centroids (auto: the scans that look it)


@dataclass
class Features:
    """One row a feature; ``columns()`` in `COLUMNS` order."""

    cols: dict[str, np.ndarray]
    traces: MassTraces
    peaks: Peaks
    skipped: Skipped

    def __len__(self) -> int:
        return int(self.cols["mz"].shape[0])


def detect_features(scans: Any, s: FeatureSettings = FeatureSettings(), *, xp: Any = np) -> Features:
    """The MS1 features of ``scans`` (`Spectrum` iterable, acquisition order); smoothing on ``xp``."""
    if s.centroid != "no":
        scans = (centroided(sp) if s.centroid == "yes" or is_profile(sp) else sp for sp in scans)
    tr, skipped = extract_traces(scans, ppm=s.ppm, max_gap=s.max_gap, min_points=s.min_points, noise=s.noise)
    sm = replace(s.smoothing, points=window_points(tr, s.smoothing.points, s.span_s))
    if xp is np:
        y = smooth(tr.rt, tr.intensity, tr.offsets, sm)
    else:
        from rtsearch.signal.gpu import smooth_gpu

        y = xp.asnumpy(smooth_gpu(xp, tr.rt, tr.intensity, tr.offsets, sm))
    pk = find_peaks(tr.rt, y, tr.offsets, min_points=s.min_points, min_prominence=s.valley)
    mz = tr.mean_mz[pk.trace]
    spanned = tr.scan[pk.end] - tr.scan[pk.start] + 1
    held = np.flatnonzero((tr.rt[pk.end] - tr.rt[pk.start] >= s.min_duration_s)
                          & (pk.end - pk.start + 1 >= s.min_sample_rate * spanned))  # peaks fit for a feature
    groups = [(z, int(held[lead]), held[chain].tolist()) for z, lead, chain in
              group_isotopes(mz[held], tr.rt[pk.apex[held]], tr.rt[pk.start[held]], tr.rt[pk.end[held]],
                             pk.area[held], s)]  # fmt: skip
    lead = np.array([g[1] for g in groups], np.int64)  # each feature's largest peak
    first = np.array([g[2][0] for g in groups], np.int64)
    cols = {"mz": mz[first], "charge": np.array([g[0] for g in groups], np.int64),
            "isotopes": np.array([len(g[2]) for g in groups], np.int64), "rt_apex": tr.rt[pk.apex[lead]],
            "rt_start": tr.rt[pk.start[lead]], "rt_end": tr.rt[pk.end[lead]], "fwhm": pk.fwhm[lead],
            "area": np.array([pk.area[g[2]].sum() for g in groups]), "apex_intensity": y[pk.apex[lead]],
            "quality": np.array([averagine_fit(pk.area[g[2]], (mz[g[2][0]] - PROTON) * g[0]) if g[0] else 0.0
                                 for g in groups]),
            "open": _open(tr, pk.apex[lead])}  # fmt: skip
    return Features(cols, tr, pk, skipped)


def _open(tr: MassTraces, apex: np.ndarray) -> np.ndarray:
    """Whether each apex row is its trace's first or last point on the run's first or last MS1 scan: a peak still
    rising when acquisition stopped (or already falling when it started) — its apex was not seen."""
    if apex.shape[0] == 0 or tr.scan.shape[0] == 0:
        return np.zeros(apex.shape[0], bool)
    k = np.searchsorted(tr.offsets, apex, side="right") - 1
    edge = ((apex == tr.offsets[k + 1] - 1) & (tr.scan[apex] == tr.scan.max())) | (
        (apex == tr.offsets[k]) & (tr.scan[apex] == tr.scan.min()))  # fmt: skip
    return np.asarray(edge, bool)


def window_points(tr: MassTraces, points: int, span_s: float) -> int:
    """The smoothing window's points for this run: ``points``, or more where that many of the run's MS1 scans
    (at their median spacing) span less than ``span_s`` seconds — fast profile runs (scans 0.26 s apart) would
    otherwise smooth over 2.6 s and cut one elution peak into several (OpenMS smooths over its expected FWHM,
    5 s; docs/history/RESULTS.md, issue 19)."""
    scan_rt = np.unique(tr.rt[np.unique(tr.scan, return_index=True)[1]]) if tr.scan.size else tr.rt
    if span_s <= 0 or scan_rt.shape[0] < 2:
        return points
    spacing = float(np.median(np.diff(scan_rt)))
    return max(points, int(np.ceil(span_s / spacing)) + 1) if spacing > 0 else points


def group_isotopes(mz: np.ndarray, apex: np.ndarray, start: np.ndarray, end: np.ndarray, area: np.ndarray,
                   s: FeatureSettings) -> list[tuple[int, int, list[int]]]:  # fmt: skip
    """(charge, largest peak, its peaks by m/z) of each feature (see the module docstring)."""
    n = mz.shape[0]
    steps = [-1, *range(1, s.max_isotopes)]
    partner = np.full((s.max_charge + 1, len(steps), n), -1, np.int64)  # [charge, step, peak]
    order = np.argsort(mz)
    sorted_mz = mz[order]
    for z in range(1, s.max_charge + 1):
        for q, k in enumerate(steps):
            target = mz + k * ISOTOPE_DA / z
            tol = s.ppm * 1e-6 * target
            row, at = ranges(np.searchsorted(sorted_mz, target - tol), np.searchsorted(sorted_mz, target + tol,
                                                                                     side="right"))  # fmt: skip
            cand = order[at]
            ok = (apex[cand] >= start[row]) & (apex[cand] <= end[row]) & (cand != row)
            row, cand = row[ok], cand[ok]
            far = np.abs(mz[cand] - target[row])
            pick = np.lexsort((far, row))
            row, cand = row[pick], cand[pick]
            first = np.diff(row, prepend=-1) != 0
            partner[z, q, row[first]] = cand[first]
    used = np.zeros(n, bool)
    out: list[tuple[int, int, list[int]]] = []
    for p in np.argsort(-area, kind="stable").tolist():
        if used[p]:
            continue
        best: tuple[tuple[int, float, int], list[int]] = ((1, 0.0, 0), [p])  # ((peaks, fit, -charge), chain)
        for z in range(1, s.max_charge + 1):
            ups = []
            for q in range(1, len(steps)):
                nxt = int(partner[z, q, p])
                if nxt < 0 or used[nxt]:
                    break
                ups.append(nxt)
            downs: list[int] = []
            below = p
            while len(downs) + len(ups) + 1 < s.max_isotopes + 1:
                below = int(partner[z, 0, below])
                if below < 0 or used[below] or below in downs:
                    break
                downs.insert(0, below)
            chain = _monoisotopic(downs + [p] + ups, len(downs), mz, area, z)
            key = (len(chain), averagine_fit(area[chain], (mz[chain[0]] - PROTON) * z) if len(chain) > 1 else 0.0, -z)
            if len(chain) > 1 and key > best[0]:
                best = (key, chain)
        chain = best[1]
        used[chain] = True
        out.append((-best[0][2], p, chain))
    return out


AVERAGINE_LAMBDA = 5.5e-4  # heavy isotopes a Da of averagine peptide (C4.9384 H7.7583 N1.3577 O1.4773 S0.0417)


def averagine(mass: float, peaks: int) -> np.ndarray:
    """An averagine peptide's relative isotope abundances M, M+1, … of neutral ``mass``: a Poisson distribution,
    λ ∝ mass (averagine has no integer formula for pyteomics' isotope calculator to take, and a feature needs only
    its first few peaks' proportions)."""
    lam = AVERAGINE_LAMBDA * mass
    k = np.arange(peaks)
    return np.exp(k * np.log(max(lam, 1e-12)) - lam - np.cumsum(np.r_[0.0, np.log(np.arange(1, peaks))]))


def averagine_fit(areas: np.ndarray, mass: float, below: int = 0) -> float:
    """Cosine of a pattern's areas with averagine's at ``mass`` from its ``below``-th peak on (zero before): 1 a
    perfect match."""
    model = np.r_[np.zeros(below), averagine(mass, areas.shape[0] - below)]
    return float(areas @ model / (np.linalg.norm(areas) * np.linalg.norm(model) + 1e-300))


def _monoisotopic(chain: list[int], seed: int, mz: np.ndarray, area: np.ndarray, z: int) -> list[int]:
    """``chain`` from the peak that explains its areas best as the monoisotopic one (among those up to the
    ``seed``-th, the pattern's largest), by the cosine of all its areas with averagine's from there (zero below):
    the peaks below are then another pattern's or none's, and their area counts against the choice."""
    if seed == 0:
        return chain
    fits = [averagine_fit(area[chain], (mz[chain[k]] - PROTON) * z, k) for k in range(seed + 1)]
    return chain[int(np.argmax(fits)) :]
