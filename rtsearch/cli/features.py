"""``rtsearch features``: a run's MS1 features (mass traces, Savitzky–Golay smoothed peaks, isotope patterns)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rtsearch.cli.progress import Progress
from rtsearch.cli.stores import require_writable
from rtsearch.cli.target import add_backend_argument, backend_of
from rtsearch.config import load_config
from rtsearch.errors import InputError


def add_parser(sub: Any) -> None:
    """The ``features`` command, on the subparsers ``sub`` of the ``rtsearch`` parser."""
    f = sub.add_parser(
        "features", help="find MS1 features (LC-MS peaks and isotope patterns) of a run",
        description="Centroid profile MS1 scans, follow each m/z of the run's MS1 scans into mass traces, smooth "
        "them with the uneven-spacing Savitzky-Golay filter (the Lipid Data Analyzer's: a degree-4 polynomial over "
        "the 11 points nearest in time, weights intensity^0.25, 8 passes; on the GPU with --backend cupy), cut them "
        "into "
        "chromatographic peaks at their minima and group the peaks into isotope patterns, each's monoisotopic peak "
        "and charge by the averagine model. One row a feature: m/z, charge (0: a lone peak), isotopes, apex RT, "
        "borders, FWHM, area, apex intensity, quality (the pattern's cosine with averagine's).",
    )  # fmt: skip
    f.add_argument("run", metavar="RUN", help="spectrum file with MS1 scans (mzML or mzXML, each may be .gz)")
    f.add_argument("-o", "--output", required=True, metavar="FILE", help="features file (.tsv or .parquet)")
    add_backend_argument(f)
    f.add_argument("--config", metavar="TOML", help="[search] backend")
    f.add_argument("--ppm", type=float, default=10.0, help="m/z tolerance of a trace and of isotopes (default 10)")
    f.add_argument("--max-gap", type=int, default=5, metavar="N", help="scans a trace may miss in a row (default 5)")
    f.add_argument("--min-points", type=int, default=3, metavar="N", help="points of a trace and a peak (default 3)")
    f.add_argument("--noise", type=float, default=0.0, help="peaks at or below this intensity are left out")
    f.add_argument("--min-duration", type=float, default=5.0, metavar="SECONDS",
                   help="peaks eluting for less are in no feature (default 5, OpenMS's minimum trace length)")
    f.add_argument("--min-sample-rate", type=float, default=0.5, metavar="SHARE",
                   help="peaks with a point in a smaller share of the scans they span are in no feature (default 0.5, "
                   "OpenMS's minimum sample rate)")  # fmt: skip
    f.add_argument("--valley", type=float, default=0.5, metavar="DEPTH",
                   help="a trace is cut into two peaks where it falls this share below the apexes either side "
                   "(default 0.5: to half, OpenMS's elution peak rule; 0.1: at every dip a tenth deep)")  # fmt: skip
    f.add_argument("--centroid", choices=["auto", "yes", "no"], default="auto",
                   help="profile scans to centroids first (auto, the default: scans whose points lie closer than "
                   "0.05 Da at the median)")  # fmt: skip
    f.add_argument("--points", type=int, default=11, help="smoothing window, points nearest in time (default 11)")
    f.add_argument("--span", type=float, default=5.0, metavar="SECONDS",
                   help="more points where --points of the run's MS1 scans span less than this (default 5; 0: "
                   "never)")  # fmt: skip
    f.add_argument("--order", type=int, default=4, help="smoothing polynomial degree, 0-6 (default 4)")
    f.add_argument("--passes", type=int, default=8, help="smoothing passes (default 8)")


def run(args: argparse.Namespace) -> int:
    from rtsearch.io.results import write_columns
    from rtsearch.io.spectra import read_spectra
    from rtsearch.signal.features import COLUMNS, FeatureSettings, detect_features
    from rtsearch.signal.smoothing import MAX_ORDER, Smoothing

    out = Path(args.output)
    if out.suffix.lower() not in (".tsv", ".parquet"):
        raise InputError(f"{out}: output must end in .tsv or .parquet")
    require_writable(out, "features")
    if not Path(args.run).is_file():
        raise InputError(f"{args.run}: spectrum file not found")
    if not (0 <= args.order <= MAX_ORDER and args.points >= 1 and args.passes >= 0 and args.ppm > 0
            and args.span >= 0 and args.max_gap >= 0 and args.min_points >= 1 and args.min_duration >= 0
            and 0 <= args.min_sample_rate <= 1 and 0 <= args.valley <= 1):  # fmt: skip
        raise InputError(f"--order must be 0-{MAX_ORDER}; --points, --min-points ≥ 1; --passes, --max-gap, --span, "
                         "--min-duration ≥ 0; --ppm > 0; --min-sample-rate and --valley 0-1")  # fmt: skip
    backend = backend_of(args, load_config(args.config))
    settings = FeatureSettings(ppm=args.ppm, max_gap=args.max_gap, min_points=args.min_points, noise=args.noise,
                               smoothing=Smoothing(args.points, args.order, args.passes), span_s=args.span,
                               centroid=args.centroid, min_duration_s=args.min_duration,
                               min_sample_rate=args.min_sample_rate, valley=args.valley)  # fmt: skip
    t0 = time.perf_counter()
    bar = Progress("MS1 scans", unit="scans")
    scans = []
    for sp in read_spectra(args.run, ms_levels=(1,)):
        scans.append(sp)
        bar.update()
    bar.close()
    if not scans:
        raise InputError(f"{args.run}: no MS1 scans")
    feats = detect_features(scans, settings, xp=backend.xp)
    n = write_columns(feats.cols, COLUMNS, out)
    skipped = ", ".join(f"{v} {k}" for k, v in feats.skipped.scans.items() if v) or "none"
    charged = int((feats.cols["charge"] > 0).sum())
    print(f"{out}: {n:,} features ({charged:,} with a charge) from {len(feats.peaks):,} peaks of "
          f"{len(feats.traces):,} traces in {len(scans):,} MS1 scans; scans skipped: {skipped}; "
          f"{backend.name}, {time.perf_counter() - t0:.1f} s")  # fmt: skip
    return 0
