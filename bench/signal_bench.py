"""The uneven-spacing Savitzky–Golay smoother, NumPy reference against the GPU kernel, same machine (issue 19).

Per file: its mass traces (`rtsearch.signal.traces`, not timed), then every trace of the run smoothed at once
(the thesis's defaults: 11 points, degree 4, 8 passes) by `smoothing.smooth` (float64 NumPy) and
`gpu.smooth_gpu` (CuPy, kernel compiled before, the result copied back), best of ``--repeat``; and the same for
the run's longest trace alone (a single chromatogram). Areas of the reference's peaks from both smoothings: the
share within 0.1 %. One JSON line per file.

    python3 bench/signal_bench.py --data .gpudata/data [--repeat 3]
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
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.signal.gpu import smooth_gpu  # noqa: E402
from rtsearch.signal.peaks import _area, find_peaks  # noqa: E402
from rtsearch.signal.smoothing import smooth  # noqa: E402
from rtsearch.signal.traces import extract_traces  # noqa: E402

FILES = ("bsa-orbitrapxl/BSA1.mzML.gz", "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in1.mzML.gz",
         "lcms-ms1/MapAlignmentAlgorithmPoseClustering_in2.mzML.gz", "lcms-ms1/MassTraceExtractor_1_input.mzML")


def best_of(repeat: int, fn) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    out, secs = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t0)
    return min(secs), out


def measure(cp, path: Path, repeat: int) -> dict:  # type: ignore[no-untyped-def]
    """One file's timings and parity (see the module docstring)."""
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    backend = get_backend("cupy")
    for name in FILES:
        row = measure(backend.xp, args.data / name, args.repeat)
        print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
                          "gpu": backend.device, "file": name, **row}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
