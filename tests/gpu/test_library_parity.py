"""Library scoring on the GPU (`GpuLibrary`) agrees with the NumPy reference (`score_library`).

BSA1 against the NIST BSA consensus library with its decoys: preprocessing row by row,
narrow windows (with isotope errors, charges known and unknown) exactly, open windows
(+-500) through the half-precision matrix product within its documented tolerance.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rtsearch.io.spectra import read_spectra
from rtsearch.library.store import LibraryParams, import_library, load_library, preprocess_peaks
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.library.scores import library_queries, score_library
from rtsearch.types import Spectrum, Tolerance

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def lib(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("lib") / "bsa"
    import_library([data / "spectral-libraries/nist-bsa_consensus.msp"], out)
    return load_library(out)


@pytest.fixture(scope="module")
def gpu(lib):
    from rtsearch.scoring.library.gpu import GpuLibrary

    return GpuLibrary(lib, get_backend("cupy").xp)


@pytest.fixture(scope="module")
def spectra(data):
    spectra = [s for s in read_spectra(data / "bsa-orbitrapxl/BSA1.mzML.gz") if s.ms_level == 2]
    rng = np.random.default_rng(7)
    # hard cases: 400 peaks with tied intensities (the top-150 cut falls inside a tie), peaks past the
    # library's last bin, the charge unknown, an MS1 spectrum, no peaks
    base = spectra[0]
    mz = np.sort(rng.uniform(150, 4000, 400))
    inten = rng.integers(1, 6, 400).astype(np.float32)
    # more peaks than RANK_DIRECT_MAX (ranked by bisection): tied intensities, and distinct ones
    big_mz = np.sort(rng.uniform(150, 2000, 6000))
    extra = [
        dataclasses.replace(base, scan=-5, mz=big_mz, intensity=rng.integers(1, 40, 6000).astype(np.float32)),
        dataclasses.replace(base, scan=-6, mz=big_mz[::2], intensity=rng.uniform(1, 1e6, 3000).astype(np.float32)),
        dataclasses.replace(base, scan=-1, mz=mz, intensity=inten),
        dataclasses.replace(base, scan=-2, charges=()),
        dataclasses.replace(base, scan=-3, ms_level=1),
        dataclasses.replace(base, scan=-4, mz=np.zeros(0), intensity=np.zeros(0, np.float32)),
    ]
    return spectra + extra


def _same(ref, got, *, dot_tol: float) -> int:
    """Asserts entries equal (or tied within ``dot_tol``) and scores within ``dot_tol``; how many equal."""
    assert np.array_equal(ref.entry >= 0, got.entry >= 0)
    assert np.array_equal(ref.candidates, got.candidates)
    same = ref.entry == got.entry
    assert np.abs(ref.dot - got.dot).max() <= dot_tol
    for name in ("dot_bias", "delta_dot", "f_value"):
        a, b = getattr(ref, name)[same], getattr(got, name)[same]
        assert np.abs(a - b).max() <= 10 * dot_tol, (name, np.argsort(-np.abs(a - b))[:5])
    return int(same.sum())


def test_preprocessed_rows_are_the_reference_rows(lib, gpu, spectra):
    cp = gpu.cp
    q = library_queries(lib, spectra, Tolerance(20, "ppm"))
    Q, _ = gpu._rows(spectra, q)
    got = cp.asnumpy(Q)
    for s, sp in enumerate(spectra):
        want = np.zeros(gpu.n_bins, np.float32)
        b, v = preprocess_peaks(sp.mz, sp.intensity, sp.precursor_mz, lib.params)
        keep = b < gpu.n_bins
        want[b[keep]] = v[keep]
        np.testing.assert_allclose(got[s], want, rtol=3e-7, atol=1e-8, err_msg=f"spectrum {s}")


@pytest.mark.parametrize("isotopes", [(0,), (0, 1)])
@pytest.mark.parametrize("batch", [None, 7])
def test_narrow_windows_match_exactly(lib, gpu, spectra, isotopes, batch):
    tol = Tolerance(20, "ppm")
    ref = score_library(lib, spectra, tol, isotope_errors=isotopes)
    size = batch or len(spectra)
    parts = [gpu.score(spectra[i : i + size], tol, isotope_errors=isotopes, mode="narrow")
             for i in range(0, len(spectra), size)]  # fmt: skip
    got = type(ref)(*(np.concatenate([getattr(p, f) for p in parts]) for f in ref.__dataclass_fields__))
    same = _same(ref, got, dot_tol=1e-6)
    assert np.array_equal(ref.matched_peaks[ref.entry == got.entry], got.matched_peaks[ref.entry == got.entry])
    assert (ref.entry >= 0).sum() > 100 and same >= (ref.entry >= 0).sum() - 2
    print(f"narrow {isotopes}, batch {size}: {same}/{len(spectra)} same entry")


def test_open_windows(lib, gpu, spectra):
    tol = Tolerance(500, "Da")
    ref = score_library(lib, spectra, tol)
    walked = gpu.score(spectra, tol, mode="narrow")  # the warp kernel over windows of ~1,000 entries: exact
    _same(ref, walked, dot_tol=1e-6)
    got = gpu.score(spectra, tol, mode="open")
    assert gpu.device_bytes()["dense"] == len(lib) * (-(-gpu.n_bins // 64) * 64) * 2
    # ranked in half precision: the chosen entry's exact dot is within 2e-3 of the best's
    hit = ref.entry >= 0
    assert np.array_equal(hit, got.entry >= 0) and np.array_equal(ref.candidates, got.candidates)
    assert (ref.dot[hit] - got.dot[hit]).max() <= 2e-3 and (got.dot[hit] - ref.dot[hit]).max() <= 1e-9
    same = ref.entry == got.entry
    assert same[hit].mean() >= 0.95
    # the reported dot is the exact dot of the entry reported
    for s in np.flatnonzero(hit)[:200]:
        b, v = preprocess_peaks(spectra[s].mz, spectra[s].intensity, spectra[s].precursor_mz, lib.params)
        lb, lv = lib.peaks(int(got.entry[s]))
        common, i, j = np.intersect1d(b, lb, return_indices=True)
        assert got.dot[s] == pytest.approx(float((v[i].astype(np.float64) * lv[j]).sum()), abs=1e-6)
    print(f"open: {same[hit].sum()}/{hit.sum()} same entry; worst dot shortfall {(ref.dot - got.dot)[hit].max():.2e}")


def test_open_windows_walked_when_the_dense_copy_does_not_fit(lib, spectra):
    from rtsearch.scoring.library.gpu import GpuLibrary

    small = GpuLibrary(lib, get_backend("cupy").xp, dense_limit_bytes=1024)
    tol = Tolerance(500, "Da")
    got, ref = small.score(spectra, tol, mode="open"), score_library(lib, spectra, tol)
    assert small.dense is None and small.dense_fits is False
    _same(ref, got, dot_tol=1e-6)  # walked: exact


def test_tiny_library_golden(tmp_path):
    """The unit test's hand-computed case, on the GPU."""
    from rtsearch.scoring.library.gpu import GpuLibrary

    (tmp_path / "l.msp").write_text("Name: PEPTIDEK/2\nNum peaks: 2\n200.0\t36\n300.0\t64\n"
                                    "Name: EPTIDEPK/2\nNum peaks: 2\n200.0\t64\n400.0\t36\n")  # fmt: skip
    import_library([tmp_path / "l.msp"], tmp_path / "lib", LibraryParams(decoys=False))
    lib = load_library(tmp_path / "lib")
    prec = float(lib.precursor_mz[0])
    query = Spectrum("r", 1, 2, np.array([200.0, 300.0]), np.array([36.0, 64.0], np.float32), prec, (2,))
    for mode in ("narrow", "open"):
        m = GpuLibrary(lib, get_backend("cupy").xp).score([query], Tolerance(20, "ppm"), mode=mode)
        assert lib.peptides[m.entry[0]] == "PEPTIDEK"
        assert m.dot[0] == pytest.approx(1.0, abs=1e-6) and m.delta_dot[0] == pytest.approx(0.52, abs=1e-6)
        assert m.candidates[0] == 2 and m.f_value[0] == pytest.approx(0.56, abs=1e-6)
