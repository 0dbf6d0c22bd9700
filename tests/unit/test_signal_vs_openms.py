"""MS1 peaks against OpenMS's on the same real files: OpenMS 3.6's MassTraceDetection + ElutionPeakDetection
peaks (PeakPickerHiRes first on the profile run), kept in tests/golden/openms_peaks by `python
bench/ms1_signal.py --data ../shared/data --openms --golden tests/golden/openms_peaks` (OpenMS's σ 10/3 ppm:
its ±3σ window is rtsearch's ±10 ppm). An OpenMS peak is matched by one of rtsearch's within 10 ppm whose apex
lies inside its RT borders; areas compared at the median (issue 19 asks ≥ 90 % matched, within 10 %)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rtsearch.io.spectra import read_spectra
from rtsearch.signal.features import FeatureSettings, detect_features
from tests.conftest import data_dir
from tests.peak_match import match

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "openms_peaks"


def _compare(name: str, settings: FeatureSettings) -> tuple[float, float]:
    """(share of OpenMS's peaks matched, median area ratio rtsearch / OpenMS) on lcms-ms1/``name``."""
    theirs = np.loadtxt(GOLDEN / f"{name.split('.')[0]}.tsv", skiprows=1, ndmin=2)
    f = detect_features(read_spectra(data_dir() / "lcms-ms1" / name, ms_levels=(1,)), settings)
    tr, pk = f.traces, f.peaks
    mine = np.stack([tr.mean_mz[pk.trace], tr.rt[pk.apex], pk.area, pk.fwhm], axis=1)
    hit = match(theirs, mine, 10.0)
    ok = hit >= 0
    return float(ok.mean()), float(np.median(mine[hit[ok], 2] / theirs[ok, 3]))


def test_a_fast_profile_run_matches_openms_when_smoothed_over_seconds() -> None:
    # Q Exactive profile scans 0.26 s apart: 11 points smooth over 2.9 s and cut elution peaks in pieces
    matched, ratio = _compare("FeatureFinderMetaboIdent_1_input.mzML", FeatureSettings())
    assert matched >= 0.9 and ratio == pytest.approx(1.0, abs=0.1)
    # the thesis's 11 points alone, cut at every valley a tenth deep: 20 % short (half-deep valleys, OpenMS's and the
    # default, hide most of it)
    matched, ratio = _compare("FeatureFinderMetaboIdent_1_input.mzML", FeatureSettings(span_s=0.0, valley=0.1))
    assert ratio < 0.9


def test_a_sparse_low_accuracy_run_beside_openms() -> None:
    # 279 MS1 scans whose centroids scatter ±10–25 ppm: traces split by the order of the scans are stitched back
    matched, ratio = _compare("MassTraceExtractor_1_input.mzML", FeatureSettings())
    assert matched >= 0.9 and ratio == pytest.approx(1.0, abs=0.1)
