"""The Savitzky–Golay smoothers (`rtsearch.signal.smoothing`): values worked out by hand, polynomials kept
exactly, the weights and the clipping, windows of the points nearest in time, and OpenMS's fixed-frame filter's
textbook coefficients."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.signal.smoothing import Smoothing, smooth, smooth_fixed, windows


def _one(t: list[float], y: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.array(t, float), np.array(y, float), np.array([0, len(t)])


def test_three_points_fit_a_line_by_hand() -> None:
    # 3 points: degree lowered to 3 - 2 = 1; values <= 1 weigh 1. Least squares by hand: mean t 4/3, mean y 0.5,
    # slope 0.3 / (42/9) = 2.7/42; the line at t = 0, 1, 3; a second pass refits the same line.
    t, y, off = _one([0.0, 1.0, 3.0], [0.2, 0.8, 0.5])
    want = 0.5 + 2.7 / 42 * (np.array([0.0, 1.0, 3.0]) - 4 / 3)
    assert smooth(t, y, off, Smoothing(passes=1)) == pytest.approx(want, rel=1e-12)
    assert smooth(t, y, off, Smoothing(passes=2)) == pytest.approx(want, rel=1e-12)


def test_weights_are_intensity_to_the_quarter() -> None:
    # y = 16, 1, 81 weigh 2, 1, 3: the weighted least-squares line, by its closed form
    t, y, off = _one([0.0, 1.0, 2.0], [16.0, 1.0, 81.0])
    w = np.array([2.0, 1.0, 3.0])
    tw, yw = (w * t).sum() / w.sum(), (w * y).sum() / w.sum()
    slope = (w * (t - tw) * (y - yw)).sum() / (w * (t - tw) ** 2).sum()
    assert smooth(t, y, off, Smoothing(passes=1)) == pytest.approx(yw + slope * (t - tw), rel=1e-12)
    unweighted = np.polyval(np.polyfit(t, y, 1), t)
    assert not np.allclose(smooth(t, y, off, Smoothing(passes=1)), unweighted)


def test_a_quartic_on_uneven_times_is_kept_exactly() -> None:
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(0.5, 3.0, 40))
    x = (t - t.mean()) / t.std()
    y = 500 + 40 * x - 30 * x**2 + 5 * x**3 + 2 * x**4  # positive over the trace
    assert y.min() > 1
    got = smooth(t, y, np.array([0, 40]))  # 8 passes, degree 4, 11 points: each fit is exact
    assert got == pytest.approx(y, rel=1e-9)


def test_clipped_at_the_traces_minimum_and_traces_kept_apart() -> None:
    t = np.arange(12, dtype=float)
    spike = np.full(12, 100.0)
    spike[6] = 5000.0  # a fit through a lone spike undershoots beside it
    flat = np.full(5, 42.0)
    y = np.concatenate([spike, flat])
    out = smooth(np.concatenate([t, np.arange(5.0)]), y, np.array([0, 12, 17]))
    assert out[:12].min() >= 100.0 and out[:12].max() < 5000.0 and np.any(out[:12] == 100.0)
    assert out[12:] == pytest.approx(flat)  # the next trace is its own: no spill-over


def test_windows_are_the_points_nearest_in_time() -> None:
    t = np.array([0.0, 1.0, 2.0, 10.0, 11.0, 12.0, 13.0])
    lo, hi = windows(t, np.array([0, 7]), 3)
    assert (lo[2], hi[2]) == (0, 3)  # t = 2: 0, 1, 2 (10 is far)
    assert (lo[3], hi[3]) == (3, 6)  # t = 10: 10, 11, 12
    assert (lo[6], hi[6]) == (4, 7)  # the end: the last three
    lo, hi = windows(t[:2], np.array([0, 2]), 11)
    assert lo.tolist() == [0, 0] and hi.tolist() == [2, 2]  # a short trace: all of it


def test_fixed_frame_has_the_textbook_coefficients() -> None:
    # frame 5, degree 2: the centre value is (-3, 12, 17, 12, -3) / 35 of the frame (Savitzky and Golay, 1964)
    rng = np.random.default_rng(1)
    y = rng.uniform(0, 100, 20)
    got = smooth_fixed(y, np.array([0, 20]), frame=5, order=2)
    want = np.convolve(y, np.array([-3, 12, 17, 12, -3]) / 35.0, mode="valid")
    assert got[2:-2] == pytest.approx(want, rel=1e-10)
    quad = 3.0 + 0.5 * np.arange(20) - 0.02 * np.arange(20) ** 2
    assert smooth_fixed(quad, np.array([0, 20]), frame=5, order=2) == pytest.approx(quad, rel=1e-10)  # ends too
