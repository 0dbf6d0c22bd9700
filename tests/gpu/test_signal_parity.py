"""The GPU smoother (`rtsearch.signal.gpu`) gives the float64 NumPy reference's values: every trace of BSA1's
MS1 and of an lcms-ms1 run, and the peaks' areas within 0.1 % for at least 99.5 % of peaks."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.signal.gpu import smooth_gpu
from rtsearch.signal.peaks import _area, find_peaks
from rtsearch.signal.smoothing import Smoothing, smooth
from rtsearch.signal.traces import extract_traces
from tests.conftest import data_dir

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", ["bsa-orbitrapxl/BSA1.mzML.gz",
                                  "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in1.mzML.gz"])
def test_whole_runs_same_values_and_areas(name: str) -> None:
    cp = get_backend("cupy").xp
    tr, _ = extract_traces(read_spectra(data_dir() / name, ms_levels=(1,)))
    want = smooth(tr.rt, tr.intensity, tr.offsets)
    got = cp.asnumpy(smooth_gpu(cp, tr.rt, tr.intensity, tr.offsets))
    assert np.allclose(got, want, rtol=1e-8, atol=1e-6)  # float64 both; 3.6e-9 apart at most on BSA1 on an H100
    pk = find_peaks(tr.rt, want, tr.offsets)
    ref, dev = _area(tr.rt, want, pk.start, pk.end), _area(tr.rt, got, pk.start, pk.end)
    assert np.mean(np.abs(dev / ref - 1) <= 1e-3) >= 0.995
    assert len(find_peaks(tr.rt, got, tr.offsets)) == len(pk)


def test_short_traces_and_other_settings() -> None:
    """Traces of 1 to 12 points (degree lowered), degree 2 and 6, one pass and three (degree 6's normal equations
    are ill-conditioned: the two solvers agree to ~1e-9 there, not to the last digits)."""
    cp = get_backend("cupy").xp
    rng = np.random.default_rng(4)
    sizes = np.arange(1, 13).repeat(20)
    offsets = np.r_[0, np.cumsum(sizes)]
    rt = np.concatenate([np.cumsum(rng.uniform(0.5, 4.0, n)) for n in sizes])
    y = rng.gamma(2.0, 1e4, offsets[-1])
    for s in (Smoothing(), Smoothing(points=7, order=2, passes=1), Smoothing(points=15, order=6, passes=3)):
        want = smooth(rt, y, offsets, s)
        assert np.allclose(cp.asnumpy(smooth_gpu(cp, rt, y, offsets, s)), want, rtol=1e-6, atol=1e-6)
