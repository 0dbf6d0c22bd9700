"""Centroiding of profile scans (`rtsearch.signal.centroid`): Gaussian profile peaks sampled unevenly give their
centres and heights, peaks apart stay apart, profile scans are told from centroided ones, and a real profile
run (Q Exactive) goes through `rtsearch features` centroided."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.io.spectra import read_spectra
from rtsearch.signal.centroid import centroid, is_profile
from rtsearch.signal.features import FeatureSettings, detect_features
from rtsearch.types import Spectrum
from tests.conftest import data_dir


def _gauss(x: np.ndarray, centre: float, height: float, sigma: float) -> np.ndarray:
    return height * np.exp(-0.5 * ((x - centre) / sigma) ** 2)


def test_gaussian_peaks_give_their_centres_and_heights() -> None:
    rng = np.random.default_rng(2)
    x = np.sort(np.concatenate([500.0 + np.cumsum(rng.uniform(0.0008, 0.0012, 40)),
                                502.0 + np.cumsum(rng.uniform(0.0008, 0.0012, 40))]))  # fmt: skip
    y = _gauss(x, 500.02013, 1e6, 0.003) + _gauss(x, 502.01771, 3e5, 0.003)
    mz, inten = centroid(x, y)
    assert mz == pytest.approx([500.02013, 502.01771], abs=1e-7)  # a Gaussian's log is a parabola: exact
    assert inten == pytest.approx([1e6, 3e5], rel=1e-6)


def test_points_far_apart_are_separate_peaks_and_edges_are_kept() -> None:
    x = np.array([100.0, 100.001, 100.002, 100.5, 100.501, 100.502])
    y = np.array([1.0, 5.0, 1.0, 2.0, 6.0, 0.0])  # the second apex has a zero neighbour: its own point
    mz, inten = centroid(x, y)
    assert len(mz) == 2 and mz[1] == 100.501 and inten[1] == 6.0
    assert mz[0] == pytest.approx(100.001, abs=1e-9)  # symmetric neighbours: the middle point
    lone = centroid(np.array([100.0, 101.0, 102.0]), np.array([1.0, 9.0, 1.0]))  # 1 Da apart: not one peak
    assert len(lone[0]) == 0


def test_profile_scans_told_from_centroided_ones() -> None:
    prof = Spectrum("r", 1, 1, 400 + np.arange(100) * 0.001, np.ones(100, np.float32))
    cent = Spectrum("r", 2, 1, 400 + np.arange(100) * 0.7, np.ones(100, np.float32))
    assert is_profile(prof) and not is_profile(cent)


def test_a_profile_run_is_centroided_before_tracing() -> None:
    path = data_dir() / "lcms-ms1" / "FeatureFinderMetaboIdent_1_input.mzML"
    auto = detect_features(read_spectra(path, ms_levels=(1,)))
    raw = detect_features(read_spectra(path, ms_levels=(1,)), FeatureSettings(centroid="no"))
    assert len(auto) > 100 and auto.traces.rt.shape[0] < raw.traces.rt.shape[0] / 3  # a centroid per profile peak
    assert len(auto.traces) < len(raw.traces)
