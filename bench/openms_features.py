"""rtsearch's MS1 chromatographic peaks beside OpenMS's on the same files (issue 19).

OpenMS (pyopenms; `pip install pyopenms`, not a dependency of rtsearch): MassTraceDetection then
ElutionPeakDetection (profile files PeakPickerHiRes first), with their defaults but the mass tolerance (``--ppm``),
give mass-trace peaks with an m/z, RT borders (their convex hull), FWHM and area (``computePeakArea``). OpenMS's
``mass_error_ppm`` is a standard deviation: a trace takes peaks within ±3 of them of its centroid (and re-estimates
it from its own points), so OpenMS is run at ``--ppm`` / 3 — the same ±``--ppm`` window as rtsearch's trace
tolerance (``--openms-ppm`` sets another). rtsearch:
`rtsearch.signal` (traces, the uneven-spacing Savitzky–Golay smoother on NumPy, peaks). An OpenMS peak is matched
when one of rtsearch's lies within ``--ppm`` of its m/z with its apex inside its RT borders; the areas of matched
pairs are compared (ratio rtsearch / OpenMS, its median and the share within 10 %). One JSON line per file.

    python bench/openms_features.py --data ../shared/data [--ppm 10] [--openms-ppm SD] [--files lcms-ms1/F.mzML,...]
                                       [--golden tests/golden/openms_peaks]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.peers import cpu_model  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.signal.features import FeatureSettings, detect_features  # noqa: E402

FILES = ("lcms-ms1/FeatureFinderMetaboIdent_1_input.mzML", "lcms-ms1/MassTraceExtractor_1_input.mzML",
         "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in1.mzML.gz",
         "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in2.mzML.gz", "bsa-orbitrapxl/BSA1.mzML.gz")


def openms_peaks(path: Path, ppm: float) -> tuple[np.ndarray, float]:
    """[peaks, 5]: m/z, RT min, RT max, area, FWHM of OpenMS's mass-trace peaks; and the seconds it took."""
    import pyopenms as oms

    exp = oms.MSExperiment()
    oms.MzMLFile().load(str(path), exp)
    exp.setSpectra([s for s in exp.getSpectra() if s.getMSLevel() == 1])
    t0 = time.perf_counter()
    if exp.size() and exp[0].getType() == oms.SpectrumSettings.SpectrumType.PROFILE:
        exp = oms.PeakPickerHiRes().pickExperiment(exp, True)
    mtd = oms.MassTraceDetection()
    p = mtd.getDefaults()
    p.setValue("mass_error_ppm", float(ppm))
    mtd.setParameters(p)
    split = oms.ElutionPeakDetection().detectPeaks(mtd.run(exp, 0))
    secs = time.perf_counter() - t0
    rows = []
    for mt in split:
        hull = mt.getConvexhull().getBoundingBox()
        rows.append((mt.getCentroidMZ(), hull.minPosition()[0], hull.maxPosition()[0], mt.computePeakArea(),
                     mt.getFWHM()))  # fmt: skip
    return np.array(rows, np.float64).reshape(-1, 5), secs


def ours(path: Path, ppm: float) -> tuple[np.ndarray, float]:
    """[peaks, 4]: m/z (the trace's), apex RT, area, FWHM of rtsearch's peaks; and the seconds."""
    t0 = time.perf_counter()
    f = detect_features(read_spectra(path, ms_levels=(1,)), FeatureSettings(ppm=ppm))
    secs = time.perf_counter() - t0
    tr, pk = f.traces, f.peaks
    return np.stack([tr.mean_mz[pk.trace], tr.rt[pk.apex], pk.area, pk.fwhm], axis=1), secs


def match(theirs: np.ndarray, mine: np.ndarray, ppm: float) -> np.ndarray:
    """For each of OpenMS's peaks, the index of the most intense of rtsearch's that matches it (-1: none)."""
    order = np.argsort(mine[:, 0])
    mz = mine[order, 0]
    out = np.full(theirs.shape[0], -1, np.int64)
    for k, (m, lo_rt, hi_rt, _, _) in enumerate(theirs.tolist()):
        a, b = np.searchsorted(mz, [m * (1 - ppm * 1e-6), m * (1 + ppm * 1e-6)], side="left")
        cand = order[a:b]
        cand = cand[(mine[cand, 1] >= lo_rt) & (mine[cand, 1] <= hi_rt)]
        if cand.size:
            out[k] = cand[np.argmax(mine[cand, 2])]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--ppm", type=float, default=10.0)
    ap.add_argument("--openms-ppm", type=float, help="OpenMS's mass_error_ppm, a standard deviation (default ppm/3)")
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--golden", type=Path, metavar="DIR",
                    help="also write OpenMS's peaks of each file to DIR/<file>.tsv (tests/golden/openms_peaks)")
    args = ap.parse_args()
    for name in args.files.split(","):
        path = args.data / name
        theirs, t_secs = openms_peaks(path, args.openms_ppm or args.ppm / 3)
        if args.golden:
            args.golden.mkdir(parents=True, exist_ok=True)
            np.savetxt(args.golden / f"{path.name.split('.')[0]}.tsv", theirs, fmt="%.6f", delimiter="\t",
                       header="mz\trt_min\trt_max\tarea\tfwhm", comments="")  # fmt: skip
        mine, m_secs = ours(path, args.ppm)
        hit = match(theirs, mine, args.ppm)
        ok = hit >= 0
        ratio = mine[hit[ok], 2] / theirs[ok, 3]
        print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
                          "file": name, "openms_mass_error_ppm": round(args.openms_ppm or args.ppm / 3, 3),
                          "openms_peaks": len(theirs), "rtsearch_peaks": len(mine),
                          "matched": int(ok.sum()), "matched_share": round(float(ok.mean()), 4) if len(ok) else 0,
                          "area_ratio_median": round(float(np.median(ratio)), 4) if ratio.size else None,
                          "area_within_10pct": round(float(np.mean(np.abs(ratio - 1) <= 0.1)), 4) if ratio.size
                          else None, "openms_s": round(t_secs, 3), "rtsearch_s": round(m_secs, 3)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
