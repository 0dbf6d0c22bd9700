"""The fused preprocessing kernel (`GpuIndex.preprocess`) gives NumPy's `preprocess` rows and row sums."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.gpu import GpuIndex, row_sums
from rtsearch.spectrum import pack, pad, preprocess
from rtsearch.types import C13_DELTA, Spectrum
from tests.devruns import DEV_RUNS

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu(demo_index):
    return GpuIndex(demo_index, get_backend("cupy").xp)


def _hard_cases() -> list[Spectrum]:
    rng = np.random.default_rng(11)
    out = []

    def sp(mz, inten, prec=900.0):
        return Spectrum("t", len(out), 2, np.asarray(mz, np.float64), np.asarray(inten, np.float32), prec, (2,))

    out.append(sp([200, 300, 300, 300, 400], [5, 1, 7, 7, 2]))  # equal m/z: ordered by rank
    mz = np.sort(rng.uniform(150, 2000, 400))
    out.append(sp(mz, rng.integers(1, 6, 400)))  # the top-150 cut inside a tie
    big = np.sort(rng.uniform(150, 2000, 3000))
    out.append(sp(big, rng.uniform(1, 1e6, 3000)))  # > 512 peaks: bisection
    out.append(sp(big, rng.integers(1, 9, 3000)))  # > 512 peaks, ties at the threshold
    base = np.sort(rng.uniform(200, 1500, 60))
    iso_mz = np.sort(np.concatenate([base, base + C13_DELTA, base + C13_DELTA / 2 + 0.001]))
    out.append(sp(iso_mz, rng.uniform(1, 100, iso_mz.size)))  # isotope peaks at z 1 and 2
    out.append(sp([], []))
    out.append(sp([100.0, 120.0], [5, 6]))  # all below min_mz
    out.append(sp([899.5, 900.0, 900.8], [5, 6, 7]))  # all within the precursor window
    out.append(sp(np.sort(rng.uniform(150, 2000, 4096)), rng.uniform(0, 3, 4096)))  # a full packed row, zeros
    return out


@pytest.mark.parametrize("deiso", [0.0, 0.02], ids=["plain", "deisotoped"])
@pytest.mark.parametrize("source", ["dev runs", "hard cases"])
def test_rows_and_sums_are_numpys(gpu, data, source, deiso):
    if source == "dev runs":
        spectra = [s for d in DEV_RUNS for s in read_spectra(d.paths(data)[1]) if s.ms_level == 2]
    else:
        spectra = _hard_cases()
    for top in (150, 50):
        for at in range(0, len(spectra), 700):
            flat = pack(SpectraBatch.of(spectra[at : at + 700]))
            ref = preprocess(pad(flat, np), top_peaks=top, min_mz=150.0, precursor_removal_da=1.5, xp=np,
                             deisotope_da=deiso)  # fmt: skip
            inten, cum, total, sq = row_sums(ref.intensity, np)
            got = gpu.preprocess(flat, top_peaks=top, min_mz=150.0, precursor_removal_da=1.5, deisotope_da=deiso)
            h = gpu.cp.asnumpy
            np.testing.assert_array_equal(h(got.n_peaks), ref.n_peaks)
            np.testing.assert_array_equal(h(got.mz), ref.mz)
            np.testing.assert_array_equal(h(got.intensity), inten)
            np.testing.assert_array_equal(h(got.cum), cum)
            np.testing.assert_allclose(h(got.total), total, rtol=1e-12)
            np.testing.assert_allclose(h(got.sq), sq, rtol=1e-12)
