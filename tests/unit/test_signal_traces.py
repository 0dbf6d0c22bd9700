"""Mass traces (`rtsearch.signal.traces`) and chromatographic peaks (`rtsearch.signal.peaks`): seeded synthetic
scans with known traces, bad scans counted with their reason, Gaussians' areas and widths by their formulas, and
a real run's MS1 (BSA1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rtsearch.io.spectra import read_spectra
from rtsearch.signal.peaks import find_peaks
from rtsearch.signal.traces import extract_traces
from rtsearch.types import Spectrum
from tests.conftest import data_dir


def _scan(i: int, mz: list[float], inten: list[float], rt: float | None = None) -> Spectrum:
    return Spectrum("r", i, 1, np.array(mz, float), np.array(inten, np.float32), rt=float(i if rt is None else rt))


def test_two_masses_followed_across_a_gap_noise_dropped() -> None:
    rng = np.random.default_rng(0)
    scans = []
    for i in range(12):
        if i == 5:  # both masses missed in one scan: the traces go on
            scans.append(_scan(i, [250.0 + i], [50.0]))
            continue
        a = 400.0 * (1 + rng.normal(0, 2e-6))  # 2 ppm jitter
        b = 400.004 * (1 + rng.normal(0, 2e-6))  # 10 ppm above a: its own trace (a peak joins the nearest)
        scans.append(_scan(i, sorted([a, b, 300.0 + 7 * i]), [1e4, 2e4, 30.0]))
    tr, skipped = extract_traces(scans, ppm=5.0, min_points=3)
    assert len(tr) == 2 and tr.lengths.tolist() == [11, 11]
    assert sorted(np.round(tr.mean_mz, 3).tolist()) == [400.0, 400.004]
    assert 5 not in tr.scan.tolist() and skipped.peaks == 0
    assert np.all(np.diff(tr.rt[: tr.offsets[1]]) > 0)


def test_a_trace_ends_after_max_gap_scans_without_it() -> None:
    scans = [_scan(i, [500.0], [100.0]) if i not in (4, 5, 6) else _scan(i, [900.0], [1.0]) for i in range(10)]
    assert extract_traces(scans, max_gap=3, min_points=3)[0].lengths.tolist() == [7, 3]  # 500 m/z, then 900
    assert extract_traces(scans, max_gap=2, min_points=3)[0].lengths.tolist() == [4, 3, 3]  # 500 twice


def test_bad_scans_are_counted_with_their_reason() -> None:
    scans = [_scan(0, [100.0, 200.0], [5.0, 5.0]), _scan(1, [200.0, 100.0], [5.0, 5.0]),
             _scan(2, [], []), _scan(3, [100.0, np.nan], [5.0, 5.0]), _scan(4, [100.0], [-1.0]),
             _scan(5, [100.0], [5.0], rt=-3.0)]  # fmt: skip
    tr, skipped = extract_traces(scans, min_points=1)
    assert skipped.scans == {"empty": 1, "unsorted m/z": 1, "not finite": 1, "not MS1": 0, "out of RT order": 1}
    assert skipped.peaks == 1 and tr.lengths.sum() == 2  # scan 0's two peaks; scan 4's peak is not above 0


def test_two_gaussians_give_two_peaks_with_their_areas_and_widths() -> None:
    t = np.arange(0.0, 120.0, 0.5)
    y = 1e6 * np.exp(-0.5 * ((t - 40) / 4) ** 2) + 5e5 * np.exp(-0.5 * ((t - 80) / 3) ** 2) + 1.0
    pk = find_peaks(t, y, np.array([0, t.shape[0]]))
    assert len(pk) == 2
    assert t[pk.apex].tolist() == [40.0, 80.0]
    assert pk.area[0] == pytest.approx(1e6 * 4 * math.sqrt(2 * math.pi), rel=0.01)
    assert pk.area[1] == pytest.approx(5e5 * 3 * math.sqrt(2 * math.pi), rel=0.01)
    assert pk.fwhm.tolist() == pytest.approx([2.3548 * 4, 2.3548 * 3], rel=0.01)


def test_a_shoulder_is_not_a_peak_of_its_own() -> None:
    t = np.arange(0.0, 100.0, 0.5)
    y = 1e6 * np.exp(-0.5 * ((t - 40) / 5) ** 2) + 1e5 * np.exp(-0.5 * ((t - 55) / 3) ** 2)
    y += np.where(np.abs(t - 50.0) < 1.0, -2e3, 0.0)  # a dip just deep enough to be a local minimum
    assert len(find_peaks(t, y, np.array([0, t.shape[0]]), min_prominence=0.1)) == 1
    assert len(find_peaks(t, y, np.array([0, t.shape[0]]), min_prominence=0.0)) >= 2


def test_bsa1_ms1_has_its_main_peptides_traced() -> None:
    scans = list(read_spectra(data_dir() / "bsa-orbitrapxl" / "BSA1.mzML.gz", ms_levels=(1,)))
    tr, skipped = extract_traces(scans)
    assert sum(skipped.scans.values()) == 0 and len(tr) > 5000
    # the run's MS2 precursors are mostly on a trace of their m/z
    precursors = np.array([s.precursor_mz for s in read_spectra(data_dir() / "bsa-orbitrapxl" / "BSA1.mzML.gz")])
    traced = np.sort(tr.mean_mz)
    k = np.clip(np.searchsorted(traced, precursors), 1, traced.shape[0] - 1)
    near = np.minimum(np.abs(traced[k] - precursors), np.abs(traced[k - 1] - precursors)) <= 10e-6 * precursors
    assert near.mean() > 0.8


def test_a_trace_split_by_the_order_of_its_scans_is_stitched_back() -> None:
    # MassTraceExtractor_1_input's 1307.39 at 2248–2256 s: −7.0, −0.8, then +7.7 ppm two scans later; the first two
    # set the trace's mean at −3.9 ppm, the third lies 11.6 ppm from it and opens a piece of its own; all three lie
    # within 10 ppm of their joint mean (−0.0 ppm): one trace of 3, none without stitching
    m0 = 1307.39
    ppm = [-7.0, -0.8, None, None, 7.7, None]
    scans = [Spectrum("r", i, 1, np.array([100.0] if p is None else [100.0, m0 * (1 + p * 1e-6)]),
                      np.array([5.0] if p is None else [5.0, 4400.0], np.float32), rt=2248.5 + 1.7 * i)
             for i, p in enumerate(ppm)]  # fmt: skip
    tr, _ = extract_traces(scans, ppm=10.0, min_points=3)
    got = [k for k in range(len(tr)) if abs(tr.mean_mz[k] - m0) < 0.01]
    assert len(got) == 1 and tr.lengths[got[0]] == 3
    assert tr.mean_mz[got[0]] == pytest.approx(m0, abs=1e-6 * m0)
    far = [Spectrum(s.run, s.scan, 1, s.mz, s.intensity, rt=s.rt) for s in scans]
    far[4] = Spectrum("r", 4, 1, np.array([100.0, m0 * (1 + 12e-6)]), np.array([5.0, 4400.0], np.float32),
                      rt=scans[4].rt)  # 12 ppm: 10.6 from the joint mean, no trace  # fmt: skip
    tr, _ = extract_traces(far, ppm=10.0, min_points=3)
    assert not any(abs(tr.mean_mz[k] - m0) < 0.05 for k in range(len(tr)))
