"""MS1 features (`rtsearch.signal.features`): isotope patterns of known charge built from synthetic scans, the
largest peak not taken for the monoisotopic one, and BSA1's MS1 with its MS2 precursors among the features."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.io.spectra import read_spectra
from rtsearch.signal.features import ISOTOPE_DA, FeatureSettings, detect_features, window_points
from rtsearch.types import Spectrum
from tests.conftest import data_dir


def _run(patterns: list[tuple[float, int, list[float], float]]) -> list[Spectrum]:
    """Scans every 2 s over 160 s; each pattern (mono m/z, charge, isotope heights, apex RT) elutes as a
    Gaussian of sigma 6 s."""
    scans = []
    for i, rt in enumerate(np.arange(0.0, 160.0, 2.0)):
        mz, inten = [], []
        for mono, z, heights, apex in patterns:
            for k, h in enumerate(heights):
                mz.append(mono + k * ISOTOPE_DA / z)
                inten.append(h * np.exp(-0.5 * ((rt - apex) / 6.0) ** 2) + 10.0)
        order = np.argsort(mz)
        scans.append(Spectrum("r", i, 1, np.array(mz)[order], np.array(inten, np.float32)[order], rt=float(rt)))
    return scans


def test_isotope_patterns_of_known_charge() -> None:
    patterns = [(500.2701, 2, [1e6, 6e5, 2e5], 40.0), (722.8, 3, [4e5, 5e5, 3e5, 1e5], 70.0),
                (612.3, 1, [8e5, 3e5], 90.0)]  # the 3+ one's second isotope is its largest  # fmt: skip
    f = detect_features(_run(patterns)).cols
    assert len(f["mz"]) == 3
    by_mz = np.argsort(f["mz"])
    assert f["mz"][by_mz] == pytest.approx([500.2701, 612.3, 722.8], abs=1e-4)
    assert f["charge"][by_mz].tolist() == [2, 1, 3]
    assert f["isotopes"][by_mz].tolist() == [3, 2, 4]
    assert f["rt_apex"][by_mz].tolist() == [40.0, 90.0, 70.0]
    # area: the pattern's Gaussians (sigma 6 s) summed, above the 10-count baseline's share
    want = sum(patterns[0][2]) * 6 * np.sqrt(2 * np.pi)
    assert f["area"][by_mz][0] == pytest.approx(want, rel=0.03)


def test_the_monoisotopic_peak_is_the_one_averagine_explains() -> None:
    """A heavy 3+ peptide whose third isotope is its largest (it seeds the pattern: the two below join it), and a 2+
    peptide with another species' peak half a dalton below its monoisotopic one, 0.3 of its height: the first
    is one feature of four isotopes from its true monoisotopic peak, the second starts at its own (its quality, the
    cosine with averagine's pattern, near 1) and the foreign peak is a lone one. (Three times as high, the foreign
    peak would fit averagine as the monoisotopic peak of a lighter pattern: cosine 0.96.)"""
    from rtsearch.signal.features import averagine
    from rtsearch.types import PROTON

    heavy = averagine((1400.0 - PROTON) * 3, 4)  # ~4.2 kDa: M+2 above M+1 above M
    assert np.argmax(heavy) == 2
    light = averagine((650.0 - PROTON) * 2, 3)
    patterns = [(1400.0, 3, list(heavy / heavy.max() * 1e6), 50.0), (650.0, 2, list(light / light.max() * 5e5), 100.0),
                (650.0 - ISOTOPE_DA / 2, 1, [1.5e5], 100.0)]  # fmt: skip
    f = detect_features(_run(patterns)).cols
    by_mz = np.argsort(f["mz"])
    assert f["mz"][by_mz] == pytest.approx([650.0 - ISOTOPE_DA / 2, 650.0, 1400.0], abs=1e-4)
    assert f["charge"][by_mz].tolist() == [0, 2, 3] and f["isotopes"][by_mz].tolist() == [1, 3, 4]
    assert f["quality"][by_mz][0] == 0.0 and min(f["quality"][by_mz][1:]) > 0.99


@pytest.mark.parametrize(("run", "charged"), [("MapAlignmentAlgorithmPoseClustering_in1.mzML.gz", 2000),
                                              ("FeatureFinderMetaboIdent_1_input.mzML", 10)])  # fmt: skip
def test_features_beside_openms_feature_finding_metabo(run: str, charged: int) -> None:
    """A real peptide run (OpenMS's MapAlignment in1, 2,035 MS1 scans) and a fast profile one
    (FeatureFinderMetaboIdent's, 380 scans 0.26 s apart, centroided by each tool its own way) beside
    FeatureFindingMetabo run by pyOpenMS in the interop environment (`tests/interop/openms_features.py`): of its
    charged features ≥ 95 % found with the monoisotopic m/z within 10 ppm, ≥ 95 % of those with its charge, and no
    more than 1.5× its features (bench/ms1_features.py's comparison; in1: 97.8 %, 98.8 % and 0.92×, the profile run
    100 %, 100 % and 1.25× when written)."""
    from bench.ms1_features import compare, openms
    from tests.integration.test_export import INTEROP

    assert INTEROP.exists(), "the interop environment is missing: scripts/test makes it (.venv-interop, pyopenms)"
    path = data_dir() / "lcms-ms1" / run
    row = compare(openms(str(INTEROP), path, 10.0), detect_features(read_spectra(path, ms_levels=(1,))).cols, 10.0)
    assert row["openms_charged"] > charged, row
    assert row["found"] >= 0.95 and row["same_charge"] >= 0.95 and row["mz_ppm_abs_max"] <= 10.0, row
    assert row["count_ratio"] <= 1.5, row


def test_a_signal_seen_in_one_scan_of_five_is_no_feature() -> None:
    """OpenMS's minimum sample rate: a pattern whose peaks are in every fifth scan only (an elution profile 40 s wide
    but a point in a fifth of the scans it spans; the scans between hold another m/z) makes no feature of its own,
    the same pattern in every scan does."""
    scans = _run([(500.2701, 2, [1e6, 6e5, 2e5], 40.0), (900.0, 1, [1e5], 80.0)])
    sparse = [sp if i % 5 == 0 else Spectrum(sp.run, sp.scan, 1, sp.mz[-1:], sp.intensity[-1:], rt=sp.rt)
              for i, sp in enumerate(scans)]  # fmt: skip
    assert sorted(detect_features(scans).cols["charge"].tolist()) == [0, 2]
    assert detect_features(sparse).cols["mz"].tolist() == pytest.approx([900.0])
    assert 2 in detect_features(sparse, FeatureSettings(min_sample_rate=0.2)).cols["charge"].tolist()  # the rule alone


def test_a_trace_splits_where_it_falls_to_half() -> None:
    """OpenMS's elution peak split: two elutions of one pattern 24 s apart (sigma 6 s: the valley between them falls
    to a quarter of their apexes) are two features; 18 s apart (the valley at 0.64 of them) one: a dip no deeper is
    one elution's (find_peaks' own default, a tenth deep, would cut it)."""

    def run(apexes: tuple[float, float]) -> list[Spectrum]:
        t = np.arange(0.0, 160.0, 2.0)
        y = sum(np.exp(-0.5 * ((t - a) / 6.0) ** 2) for a in apexes) + 1e-3
        return [Spectrum("r", i, 1, np.array([612.3, 612.3 + ISOTOPE_DA]), np.array([8e5, 3e5], np.float32) * v,
                         rt=float(rt)) for i, (rt, v) in enumerate(zip(t, y, strict=True))]  # fmt: skip

    far, near = detect_features(run((60.0, 84.0))).cols, detect_features(run((60.0, 78.0))).cols
    assert sorted(far["rt_apex"].tolist()) == [60.0, 84.0] and far["charge"].tolist() == [1, 1]
    assert near["charge"].tolist() == [1]


def test_bsa1_features_hold_its_precursors() -> None:
    path = data_dir() / "bsa-orbitrapxl" / "BSA1.mzML.gz"
    f = detect_features(read_spectra(path, ms_levels=(1,))).cols
    assert len(f["mz"]) > 3000 and (f["charge"] >= 2).sum() > 1000
    ms2 = [s for s in read_spectra(path) if s.charges and s.charges[0] >= 2]
    hit = 0
    for s in ms2:
        near = (np.abs(f["mz"] - s.precursor_mz) <= 10e-6 * s.precursor_mz) & (f["rt_start"] <= s.rt + 30) & (
            f["rt_end"] >= s.rt - 30)  # fmt: skip
        hit += bool(np.any(near & (f["charge"] == s.charges[0])))
    assert hit / len(ms2) > 0.5  # precursors picked off the monoisotopic peak or off-pattern miss


def test_a_fast_run_smooths_over_seconds_not_points() -> None:
    # scans 0.25 s apart: 11 points span 2.5 s; the window takes 21 points (5 s), a 2 s run keeps 11
    fast = _run([(500.2701, 2, [1e6, 6e5], 40.0)])
    for sp in fast:
        sp.rt = sp.rt / 8.0
    f = detect_features(fast)
    assert window_points(f.traces, 11, 5.0) == 21
    assert window_points(detect_features(_run([(500.2701, 2, [1e6, 6e5], 40.0)])).traces, 11, 5.0) == 11
    assert window_points(f.traces, 11, 0.0) == 11



def test_an_elution_cut_off_by_the_runs_end_has_no_apex() -> None:
    from rtsearch.signal.precursors import precursor_elution

    # scans stop at 158 s: the 612.3 pattern (apex 170 s) is still rising, the 500.27 one (40 s) is whole
    f = detect_features(_run([(500.2701, 2, [1e6, 6e5, 2e5], 40.0), (612.3, 2, [8e5, 5e5], 170.0)])).cols
    whole, rising = (int(np.argmax(np.where(np.isclose(f["mz"], m), f["area"], -1))) for m in (500.2701, 612.3))
    assert not f["open"][whole] and f["open"][rising] and f["rt_apex"][rising] == 158.0  # the last scan
    apex, area = precursor_elution(f, np.array([500.2701, 612.3]), np.array([2, 2]), np.array([38.0, 150.0]))
    assert apex[0] == 40.0 and np.isnan(apex[1]) and np.isfinite(area).all()
