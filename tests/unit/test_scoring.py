"""Tests for spectrum preprocessing (`rtsearch.spectrum`), candidate selection
(`rtsearch.scoring.database.candidates`), full matching (`rtsearch.scoring.database.matching`)
and the linear discriminant (`rtsearch.search.lda`), all on the NumPy path.

Synthetic spectra are built from b/y ions computed with pyteomics; candidate
counts are compared with a brute-force count over every indexed fragment
(NumPy broadcasting), and scores with the formulas evaluated by hand.
"""

from __future__ import annotations

from math import lgamma, log1p
from pathlib import Path

import numpy as np
import pytest
from pyteomics import mass as pymass

from rtsearch.batch import SpectraBatch
from rtsearch.config import DatabaseConfig
from rtsearch.database.build import build_index
from rtsearch.database.index import PeptideIndex
from rtsearch.scoring.database.candidates import candidates_numpy, count_matches, in_windows, make_queries
from rtsearch.scoring.database.matching import match_numpy
from rtsearch.search.lda import fit
from rtsearch.spectrum import pack, pad, preprocess
from rtsearch.types import C13_DELTA, Spectrum, Tolerance

PROTON = pymass.nist_mass["H+"][0][0]
AA = dict(pymass.std_aa_mass)
AA["C"] = pymass.std_aa_mass["C"] + 57.021464  # fixed carbamidomethyl
AA["m"] = pymass.std_aa_mass["M"] + 15.994915  # oxidized methionine

PREC_TOL = Tolerance(20.0, "ppm")
FRAG_TOL = Tolerance(0.5, "Da")
ISO = (0, 1)


def _spectrum(mz: list[float], inten: list[float], precursor_mz: float, scan: int = 1) -> Spectrum:
    order = np.argsort(mz)
    return Spectrum(
        run="r", scan=scan, ms_level=2,
        mz=np.asarray(mz, dtype=np.float64)[order], intensity=np.asarray(inten, dtype=np.float32)[order],
        precursor_mz=precursor_mz, charges=(2,),
    )  # fmt: skip


def _ions(modseq: str) -> tuple[list[float], list[float]]:
    """b1..b(L-1) and y1..y(L-1), singly charged, with pyteomics."""
    n = len(modseq)
    b = [pymass.fast_mass(modseq[:i], ion_type="b", charge=1, aa_mass=AA) for i in range(1, n)]
    y = [pymass.fast_mass(modseq[-i:], ion_type="y", charge=1, aa_mass=AA) for i in range(1, n)]
    return b, y


def _precursor_mz(modseq: str, z: int) -> float:
    return (pymass.fast_mass(modseq, aa_mass=AA) + z * PROTON) / z


# --------------------------------------------------------------------------- preprocessing


def _two_spectra() -> list[Spectrum]:
    a = _spectrum(
        [100.0, 200.0, 300.0, 400.0, 499.0, 501.4, 501.6, 600.0, 700.0],
        [50.0, 16.0, 36.0, 36.0, 1000.0, 900.0, 4.0, 0.0, 64.0],
        precursor_mz=500.0,
    )
    b = _spectrum([149.9, 150.0, 798.5], [100.0, 25.0, 49.0], precursor_mz=800.0, scan=2)
    return [a, b]


def test_pack_and_pad() -> None:
    batch = pad(pack(SpectraBatch.of(_two_spectra())), np)
    assert batch.mz.shape == (2, 9)
    assert batch.n_peaks.tolist() == [9, 3]
    assert batch.mz[1, :3].tolist() == [149.9, 150.0, 798.5]
    assert np.all(np.isposinf(batch.mz[1, 3:]))
    assert np.all(batch.intensity[1, 3:] == 0)
    assert batch.precursor_mz.tolist() == [500.0, 800.0]


def test_pack_max_width_keeps_most_intense() -> None:
    sp = _spectrum([100.0, 200.0, 300.0, 400.0], [5.0, 1.0, 7.0, 3.0], precursor_mz=900.0)
    flat = pack(SpectraBatch.of([sp]), max_width=2)
    assert flat.mz.tolist() == [100.0, 300.0]
    assert flat.intensity.tolist() == [5.0, 7.0]


def test_preprocess_top2() -> None:
    batch = pad(pack(SpectraBatch.of(_two_spectra())), np)
    out = preprocess(batch, top_peaks=2, min_mz=150.0, precursor_removal_da=1.5, xp=np)
    # spectrum 0 after filtering: 200 (16), 300 (36), 400 (36), 501.6 (4), 700 (64)
    #   (100 < min_mz; 499.0 and 501.4 within 1.5 Da of 500; 600 has zero intensity)
    # top 2 by intensity: 700 (64), then the 300/400 tie goes to the lower m/z, 300
    # sqrt: 8, 6 -> scaled by 8: 1.0, 0.75; listed by m/z: 300, 700
    assert out.mz.shape == (2, 2)
    assert out.n_peaks.tolist() == [2, 1]
    np.testing.assert_array_equal(out.mz[0], [300.0, 700.0])
    np.testing.assert_allclose(out.intensity[0], [0.75, 1.0], rtol=1e-6)
    # spectrum 1: 149.9 < 150 removed, 150.0 kept (bound included), 798.5 is 1.5 Da from 800: removed
    assert out.mz[1, 0] == 150.0 and np.isposinf(out.mz[1, 1])
    np.testing.assert_allclose(out.intensity[1], [1.0, 0.0])
    assert out.intensity.dtype == np.float32


def test_preprocess_keeps_all_when_top_n_is_large() -> None:
    batch = pad(pack(SpectraBatch.of(_two_spectra())), np)
    out = preprocess(batch, top_peaks=50, min_mz=150.0, precursor_removal_da=1.5, xp=np)
    assert out.n_peaks.tolist() == [5, 1]
    np.testing.assert_array_equal(out.mz[0, :5], [200.0, 300.0, 400.0, 501.6, 700.0])
    # sqrt(16, 36, 36, 4, 64) = 4, 6, 6, 2, 8; / 8
    np.testing.assert_allclose(out.intensity[0, :5], [0.5, 0.75, 0.75, 0.25, 1.0], rtol=1e-6)
    assert np.all(np.isposinf(out.mz[0, 5:])) and np.all(out.intensity[0, 5:] == 0)
    assert np.all(np.isposinf(out.mz[1, 1:])) and np.all(out.intensity[1, 1:] == 0)


def test_preprocess_empty_row() -> None:
    sp = _spectrum([100.0, 120.0], [5.0, 7.0], precursor_mz=500.0)
    out = preprocess(pad(pack(SpectraBatch.of([sp])), np), top_peaks=10, min_mz=150.0, precursor_removal_da=1.5, xp=np)
    assert out.n_peaks.tolist() == [0]
    assert np.all(np.isposinf(out.mz)) and np.all(out.intensity == 0)


# --------------------------------------------------------------------------- candidates


def _find(index: PeptideIndex, modseq: str) -> int:
    for i in range(len(index)):
        seq = list(index.sequence(i))
        for pos in index.forms.mod_pos[i]:
            if pos >= 0:
                seq[int(pos)] = "m"
        if "".join(seq) == modseq:
            return i
    raise AssertionError(modseq)


# LVNELTEFAK: the classic BSA peptide; its ions plus 4 noise peaks
PEP1 = "LVNELTEFAK"
# a BSA peptide with a fixed carbamidomethyl C and an oxidized M (m), one missed cleavage
PEP2 = "GACLLPKIETmR"
NOISE = [173.3, 437.9, 611.2, 955.6]


def _synthetic_batch():  # type: ignore[no-untyped-def]
    b1, y1 = _ions(PEP1)
    b2, y2 = _ions(PEP2)
    sp1 = _spectrum(b1[1:] + y1[1:] + NOISE, [1.0] * (2 * len(b1) - 2 + len(NOISE)), _precursor_mz(PEP1, 2))
    sp2 = _spectrum(b2[1:] + y2[1:], [1.0] * (2 * len(b2) - 2), _precursor_mz(PEP2, 3), scan=2)
    return pad(pack(SpectraBatch.of([sp1, sp2])), np)


def _brute_counts(index: PeptideIndex, peaks: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """For peptides lo..hi-1: number of (peak, fragment) pairs within 0.5 Da, over all fragments."""
    fmz = index.fragments.mz.astype(np.float64)
    fpep = index.fragments.peptide.astype(np.int64)
    sel = (fpep >= lo) & (fpep < hi)
    hits = (np.abs(peaks[:, None] - fmz[None, sel]) <= 0.5).sum(axis=0)
    return np.bincount(fpep[sel] - lo, weights=hits, minlength=hi - lo).astype(np.int64)


def test_windows(bsa: PeptideIndex) -> None:
    batch = _synthetic_batch()
    q = make_queries(np.array([0, 0, 1, 1]), np.array([2, 3, 2, 3]), batch.precursor_mz, bsa.mass, PREC_TOL, ISO)
    m1 = pymass.fast_mass(PEP1, aa_mass=AA)
    assert q.mass[0] == pytest.approx(m1, abs=1e-6)
    for j in range(len(q)):
        w = q.mass[j] * 20e-6
        low, high = q.mass[j] - C13_DELTA - w, q.mass[j] + w  # isotope errors 0 and 1, merged
        assert np.all((bsa.mass[q.lo[j] : q.hi[j]] >= low) & (bsa.mass[q.lo[j] : q.hi[j]] <= high))
        if q.lo[j] > 0:
            assert bsa.mass[q.lo[j] - 1] < low
        if q.hi[j] < len(bsa):
            assert bsa.mass[q.hi[j]] > high
    i1 = _find(bsa, PEP1)
    assert q.lo[0] <= i1 < q.hi[0]


@pytest.mark.parametrize("prec_tol", [PREC_TOL, Tolerance(50.0, "Da")])
def test_count_matches_equals_brute_force(bsa: PeptideIndex, prec_tol: Tolerance) -> None:
    batch = _synthetic_batch()
    q = make_queries(np.array([0, 0, 1, 1]), np.array([2, 3, 2, 3]), batch.precursor_mz, bsa.mass, prec_tol, ISO)
    assert np.sum(q.hi - q.lo) >= 2
    counts, offsets = count_matches(bsa.fragments, batch.mz, batch.n_peaks, q, FRAG_TOL)
    for j in range(len(q)):
        peaks = batch.mz[q.spectrum[j], : batch.n_peaks[q.spectrum[j]]]
        want = _brute_counts(bsa, peaks, int(q.lo[j]), int(q.hi[j]))
        np.testing.assert_array_equal(counts[offsets[j] : offsets[j + 1]], want)


def test_count_matches_wide_window_small_buckets(data: Path) -> None:
    """Many buckets and every peptide in the window: still the brute-force count."""
    index = build_index([data / "bsa-orbitrapxl" / "BSA.fasta"], DatabaseConfig(bucket_size=64))
    batch = _synthetic_batch()
    q = make_queries(np.array([0, 1]), np.array([2, 3]), batch.precursor_mz, index.mass, Tolerance(5000.0, "Da"), (0,))
    assert q.lo.tolist() == [0, 0] and q.hi.tolist() == [len(index)] * 2
    counts, offsets = count_matches(index.fragments, batch.mz, batch.n_peaks, q, FRAG_TOL)
    for j in range(2):
        peaks = batch.mz[j, : batch.n_peaks[j]]
        want = _brute_counts(index, peaks, 0, len(index))
        np.testing.assert_array_equal(counts[offsets[j] : offsets[j + 1]], want)


def test_candidates_put_the_true_peptide_first(bsa: PeptideIndex) -> None:
    batch = _synthetic_batch()
    q = make_queries(np.array([0, 1]), np.array([2, 3]), batch.precursor_mz, bsa.mass, PREC_TOL, ISO)
    cand, cnt = candidates_numpy(
        bsa.fragments, bsa.mass, batch.mz, batch.n_peaks, q,
        precursor_tolerance=PREC_TOL, fragment_tolerance=FRAG_TOL, isotope_errors=ISO, k=5, min_count=1,
    )  # fmt: skip
    assert cand.shape == (2, 5)
    assert cand[0, 0] == _find(bsa, PEP1)
    assert cand[1, 0] == _find(bsa, PEP2)
    # brute force of the selection: in an isotope window, count >= 1, by count then index
    for j in range(2):
        lo, hi = int(q.lo[j]), int(q.hi[j])
        counts = _brute_counts(bsa, batch.mz[j, : batch.n_peaks[j]], lo, hi)
        rows = []
        for p in range(lo, hi):
            ok, _ = in_windows(np.array([q.mass[j]]), np.array([bsa.mass[p]]), PREC_TOL, ISO)
            if ok[0] and counts[p - lo] >= 1:
                rows.append((-int(counts[p - lo]), p))
        rows.sort()
        want_pep = [p for _, p in rows[:5]] + [-1] * (5 - min(5, len(rows)))
        want_cnt = [-c for c, _ in rows[:5]] + [0] * (5 - min(5, len(rows)))
        assert cand[j].tolist() == want_pep
        assert cnt[j].tolist() == want_cnt
    # the true peptide's count: every b2../y2.. ion in the index range matches its own peak
    b, y = _ions(PEP1)
    n_in_range = sum(150.0 <= v <= 2000.0 for v in b[1:] + y[1:])
    assert cnt[0, 0] >= n_in_range


def test_min_count_and_isotope_window(bsa: PeptideIndex) -> None:
    batch = _synthetic_batch()
    q = make_queries(np.array([0]), np.array([2]), batch.precursor_mz, bsa.mass, PREC_TOL, ISO)
    cand, cnt = candidates_numpy(
        bsa.fragments, bsa.mass, batch.mz, batch.n_peaks, q,
        precursor_tolerance=PREC_TOL, fragment_tolerance=FRAG_TOL, isotope_errors=ISO, k=40, min_count=1000,
    )  # fmt: skip
    assert np.all(cand == -1) and np.all(cnt == 0)
    # a spectrum one 13C too heavy still finds the peptide through isotope error 1
    heavy = batch.precursor_mz.copy()
    heavy[0] += C13_DELTA / 2
    q = make_queries(np.array([0]), np.array([2]), heavy, bsa.mass, PREC_TOL, ISO)
    cand, _ = candidates_numpy(
        bsa.fragments, bsa.mass, batch.mz, batch.n_peaks, q,
        precursor_tolerance=PREC_TOL, fragment_tolerance=FRAG_TOL, isotope_errors=ISO, k=5, min_count=1,
    )  # fmt: skip
    assert cand[0, 0] == _find(bsa, PEP1)
    q = make_queries(np.array([0]), np.array([2]), heavy, bsa.mass, PREC_TOL, (0,))
    cand, _ = candidates_numpy(
        bsa.fragments, bsa.mass, batch.mz, batch.n_peaks, q,
        precursor_tolerance=PREC_TOL, fragment_tolerance=FRAG_TOL, isotope_errors=(0,), k=5, min_count=1,
    )  # fmt: skip
    assert _find(bsa, PEP1) not in cand[0].tolist()


# --------------------------------------------------------------------------- full matching


def test_match_numpy_counts_and_hyperscore(bsa: PeptideIndex) -> None:
    b, y = _ions(PEP1)  # b[i-1] = b_i, y[i-1] = y_i, i = 1..9
    placed_b = [b[i - 1] for i in (2, 3, 4, 5, 6)]  # a run of 5
    placed_y = [y[i - 1] for i in (3, 4, 5, 7, 8)]  # runs of 3 and 2
    ion_int = [0.9, 0.3, 0.5, 0.7, 0.2, 0.4, 0.8, 0.6, 0.1, 0.35]
    noise_int = [0.25, 0.45, 0.15, 0.05]
    # precondition: every placed peak is within 0.5 Da of exactly one ion, the noise of none
    every_ion = np.array(b + y)
    for v in placed_b + placed_y:
        assert np.sum(np.abs(every_ion - v) <= 0.5) == 1
    for v in NOISE:
        assert np.all(np.abs(every_ion - v) > 1.0)
    sp = _spectrum(placed_b + placed_y + NOISE, ion_int + noise_int, _precursor_mz(PEP1, 2))
    batch = pad(pack(SpectraBatch.of([sp])), np)
    target = _find(bsa, PEP1)
    decoy = _find(bsa, "AFETLENVLK")  # its reversed decoy: same mass
    cand = np.array([[target, decoy, -1]])
    st = match_numpy(bsa, batch.mz, batch.intensity, batch.n_peaks, np.array([0]), np.array([2]), cand, FRAG_TOL, 2)
    assert st.n_b[0, 0] == 5
    assert st.n_y[0, 0] == 5
    summed = sum(float(np.float32(v)) for v in ion_int)  # the intensities as stored (float32)
    assert st.summed[0, 0] == pytest.approx(float(summed), rel=1e-6)
    # b peaks carry the first five intensities, y peaks the next five
    sum_b = sum(float(np.float32(v)) for v in ion_int[:5])
    sum_y = sum(float(np.float32(v)) for v in ion_int[5:])
    want = lgamma(5 + 1) + lgamma(5 + 1) + log1p(100 * sum_b) + log1p(100 * sum_y)
    assert st.hyperscore[0, 0] == pytest.approx(want, rel=1e-9)
    assert st.matched_peaks[0, 0] == 10
    total = sum(float(np.float32(v)) for v in ion_int + noise_int)
    assert st.explained[0, 0] == pytest.approx(float(summed) / total, rel=1e-6)
    assert st.longest_run[0, 0] == 5
    # the decoy explains less; the empty slot has no score
    assert st.hyperscore[0, 1] < st.hyperscore[0, 0]
    assert st.hyperscore[0, 2] == -np.inf
    assert st.n_b[0, 2] == 0 and st.n_y[0, 2] == 0


def test_match_numpy_modified_peptide(bsa: PeptideIndex) -> None:
    # every oxidized-M peptide of BSA with a carbamidomethyl C: take the first
    oxidized = [
        i for i in range(len(bsa))
        if not bsa.is_decoy(i) and (bsa.forms.mod_pos[i] >= 0).any() and "C" in bsa.sequence(i)
    ]  # fmt: skip
    assert oxidized
    i = oxidized[0]
    seq = list(bsa.sequence(i))
    for pos in bsa.forms.mod_pos[i]:
        if pos >= 0:
            seq[int(pos)] = "m"
    modseq = "".join(seq)
    b, y = _ions(modseq)
    every = np.array(b + y)
    # the b/y ions that are alone within 1 Da, so each peak is one ion
    lone_b = [v for v in b if np.sum(np.abs(every - v) <= 1.0) == 1]
    lone_y = [v for v in y if np.sum(np.abs(every - v) <= 1.0) == 1]
    sp = _spectrum(lone_b + lone_y, [1.0] * (len(lone_b) + len(lone_y)), _precursor_mz(modseq, 2))
    batch = pad(pack(SpectraBatch.of([sp])), np)
    st = match_numpy(bsa, batch.mz, batch.intensity, batch.n_peaks, np.array([0]), np.array([2]),
                     np.array([[i]]), FRAG_TOL, 2)  # fmt: skip
    assert st.n_b[0, 0] == len(lone_b)
    assert st.n_y[0, 0] == len(lone_y)
    want = lgamma(len(lone_b) + 1) + lgamma(len(lone_y) + 1) + log1p(100.0 * len(lone_b)) + log1p(100.0 * len(lone_y))
    assert st.hyperscore[0, 0] == pytest.approx(want, rel=1e-9)


# --------------------------------------------------------------------------- LDA


def _two_classes(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_pos, n_neg = 600, 400
    # f0 higher for positives, f1 pure noise, f2 lower for positives, f3 not fitted (ppm error)
    pos = np.column_stack([
        rng.normal(2.0, 1.0, n_pos), rng.normal(0.0, 1.0, n_pos),
        rng.normal(-1.5, 1.0, n_pos), rng.normal(0.0, 5.0, n_pos),
    ])  # fmt: skip
    neg = np.column_stack([
        rng.normal(0.0, 1.0, n_neg), rng.normal(0.0, 1.0, n_neg),
        rng.normal(0.0, 1.0, n_neg), rng.normal(0.0, 5.0, n_neg),
    ])  # fmt: skip
    x = np.vstack([pos, neg])
    decoy = np.r_[np.zeros(n_pos, bool), np.ones(n_neg, bool)]
    return x, decoy


NAMES = ("f0", "f1", "f2", "signed_ppm_error")


def test_lda_separates_two_gaussians() -> None:
    x, decoy = _two_classes(2024)
    disc = fit(x, decoy, NAMES, start="f1")  # start from the useless feature
    s = disc.score(x)
    pos, neg = s[~decoy], s[decoy]
    # AUC: fraction of (positive, negative) pairs ranked correctly
    auc = np.mean(pos[:, None] > neg[None, :])
    assert auc > 0.9
    assert np.median(pos) > np.percentile(neg, 80)
    assert disc.weights[0] > 0 and disc.weights[2] < 0
    assert abs(disc.weights[1]) < 0.5 * min(abs(disc.weights[0]), abs(disc.weights[2]))
    assert disc.weights[3] == 0.0  # signed ppm error is descriptive only
    # the ppm column has no effect on the score
    x2 = x.copy()
    x2[:, 3] += 1000.0
    np.testing.assert_allclose(disc.score(x2), s)


def test_lda_is_deterministic() -> None:
    x, decoy = _two_classes(7)
    a = fit(x, decoy, NAMES, start="f0")
    b = fit(x.copy(), decoy.copy(), NAMES, start="f0")
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.score(x), b.score(x))


def test_lda_too_few_decoys_keeps_start_feature() -> None:
    x, decoy = _two_classes(3)
    decoy[:] = False
    decoy[0] = True
    disc = fit(x, decoy, NAMES, start="f2")
    np.testing.assert_array_equal(disc.weights, [0.0, 0.0, 1.0, 0.0])
