"""MS1 signal: the uneven-spacing Savitzky–Golay smoother on the GPU against NumPy, and the peaks against OpenMS.

**Smoother** (where CuPy finds a GPU): per file, its mass traces (`rtsearch.signal.traces`, not timed), then every
trace of the run smoothed at once (the thesis's defaults: 11 points, degree 4, 8 passes) by `smoothing.smooth`
(float64 NumPy) and `gpu.smooth_gpu` (CuPy, kernel compiled before, the result copied back), best of
``--repeat``; the same for the run's longest trace alone (one chromatogram); the reference's peak areas from both
smoothings, the share within 0.1 %.

**Peaks against OpenMS** (``--openms``; ``pip install pyopenms``, not a dependency of rtsearch): MassTraceDetection
then ElutionPeakDetection (profile files PeakPickerHiRes first) with their defaults but the mass tolerance, against
`rtsearch.signal.features.detect_features`. OpenMS's ``mass_error_ppm`` is a standard deviation (a trace takes
peaks within ±3 of them), so it runs at ``--ppm`` / 3: rtsearch's ±``--ppm`` window. An OpenMS peak is matched when
one of rtsearch's lies within ``--ppm`` of its m/z with its apex inside its RT borders (`tests.peak_match.match`);
matched pairs' areas are compared. ``--golden DIR`` keeps OpenMS's peaks for tests/unit/test_signal_vs_openms.py.

    python3 bench/ms1_signal.py --data ../shared/data [--openms] [--golden tests/golden/openms_peaks] --json signal.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import emit  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.signal.features import FeatureSettings, detect_features  # noqa: E402
from rtsearch.signal.peaks import _area, find_peaks  # noqa: E402
from rtsearch.signal.smoothing import smooth  # noqa: E402
from rtsearch.signal.traces import extract_traces  # noqa: E402
from tests.peak_match import match  # noqa: E402

SMOOTHED = ("bsa-orbitrapxl/BSA1.mzML.gz", "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in1.mzML.gz",
            "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in2.mzML.gz", "lcms-ms1/MassTraceExtractor_1_input.mzML")
PEAKED = ("lcms-ms1/FeatureFinderMetaboIdent_1_input.mzML", "lcms-ms1/MassTraceExtractor_1_input.mzML",
          "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in1.mzML.gz",
          "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in2.mzML.gz", "bsa-orbitrapxl/BSA1.mzML.gz")


def best_of(repeat: int, fn) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    out, secs = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t0)
    return min(secs), out


def smoother(cp: Any, path: Path, repeat: int) -> dict[str, Any]:
    """One file's smoother timings and parity (see the module docstring)."""
    from rtsearch.signal.gpu import smooth_gpu

    tr, _ = extract_traces(read_spectra(path, ms_levels=(1,)))
    rt, y, off = tr.rt, tr.intensity, tr.offsets
    cp.asnumpy(smooth_gpu(cp, rt[:20], y[:20], np.array([0, 20])))  # compile
    t_np, ref = best_of(repeat, lambda: smooth(rt, y, off))
    t_cp, dev = best_of(repeat, lambda: cp.asnumpy(smooth_gpu(cp, rt, y, off)))
    k = int(np.argmax(tr.lengths))
    a, b = int(off[k]), int(off[k + 1])
    one = np.array([0, b - a])
    t1_np, _ = best_of(repeat, lambda: smooth(rt[a:b], y[a:b], one))
    t1_cp, _ = best_of(repeat, lambda: cp.asnumpy(smooth_gpu(cp, rt[a:b], y[a:b], one)))
    pk = find_peaks(rt, ref, off)
    ratio = _area(rt, dev, pk.start, pk.end) / _area(rt, ref, pk.start, pk.end)
    return {"traces": len(tr), "points": int(rt.shape[0]), "numpy_s": round(t_np, 4), "cupy_s": round(t_cp, 5),
            "speedup": round(t_np / t_cp, 1), "longest_trace_points": b - a, "one_numpy_s": round(t1_np, 5),
            "one_cupy_s": round(t1_cp, 5), "one_speedup": round(t1_np / t1_cp, 1), "peaks": len(pk),
            "areas_within_0.1pct": round(float(np.mean(np.abs(ratio - 1) <= 1e-3)), 5),
            "max_value_rel_diff": float(np.max(np.abs(dev - ref) / np.maximum(np.abs(ref), 1.0)))}  # fmt: skip


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


def against_openms(path: Path, ppm: float, golden: Path | None) -> dict[str, Any]:
    """One file's peaks beside OpenMS's (see the module docstring)."""
    theirs, t_secs = openms_peaks(path, ppm / 3)
    if golden:
        golden.mkdir(parents=True, exist_ok=True)
        np.savetxt(golden / f"{path.name.split('.')[0]}.tsv", theirs, fmt="%.6f", delimiter="\t",
                   header="mz\trt_min\trt_max\tarea\tfwhm", comments="")  # fmt: skip
    mine, m_secs = ours(path, ppm)
    hit = match(theirs, mine, ppm)
    ok = hit >= 0
    ratio = mine[hit[ok], 2] / theirs[ok, 3]
    return {"openms_peaks": len(theirs), "rtsearch_peaks": len(mine), "matched": int(ok.sum()),
            "matched_share": round(float(ok.mean()), 4) if len(ok) else 0,
            "area_ratio_median": round(float(np.median(ratio)), 4) if ratio.size else None,
            "area_within_10pct": round(float(np.mean(np.abs(ratio - 1) <= 0.1)), 4) if ratio.size else None,
            "openms_s": round(t_secs, 3), "rtsearch_s": round(m_secs, 3)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="a copy of ../shared/data")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--openms", action="store_true", help="also the peaks against OpenMS's (pyopenms)")
    ap.add_argument("--ppm", type=float, default=10.0, help="the trace tolerance of both, ±ppm")
    ap.add_argument("--golden", type=Path, metavar="DIR", help="with --openms: write OpenMS's peaks of each file here")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import importlib.util

    if args.openms and importlib.util.find_spec("pyopenms") is None:
        ap.error("--openms needs pyopenms (pip install pyopenms)")
    from rtsearch.scoring.backend import get_backend

    backend = get_backend("auto")
    res: dict[str, Any] = {"smoother": {}, "openms": {}}
    for name in SMOOTHED if backend.is_gpu else ():
        res["smoother"][name] = row = smoother(backend.xp, args.data / name, args.repeat)
        print(f"smoother {name}: NumPy {row['numpy_s']} s, GPU {row['cupy_s']} s ({row['speedup']}x); one trace "
              f"{row['one_speedup']}x; areas within 0.1 %: {row['areas_within_0.1pct']}", flush=True)  # fmt: skip
    for name in PEAKED if args.openms else ():
        res["openms"][name] = row = against_openms(args.data / name, args.ppm, args.golden)
        print(f"peaks {name}: {row['matched']} of OpenMS's {row['openms_peaks']} matched ({row['matched_share']}), "
              f"area ratio median {row['area_ratio_median']}; OpenMS {row['openms_s']} s, rtsearch "
              f"{row['rtsearch_s']} s", flush=True)  # fmt: skip
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
