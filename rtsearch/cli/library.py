"""``rtsearch library import|build|info``: spectral libraries into a store, from your own results, described.

(Searching a library is ``rtsearch search|serve --library``: `rtsearch.cli.target`.)
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from rtsearch.cli.progress import Progress
from rtsearch.cli.stores import print_info, require_files, require_writable
from rtsearch.errors import InputError


def add_parser(sub: Any) -> None:
    """The ``library`` command and its actions, on the subparsers ``sub`` of the ``rtsearch`` parser."""
    lib = sub.add_parser("library",
                         help="import spectral libraries (MSP, sptxt, EncyclopeDIA .dlib/.elib) for library search")
    lsub = lib.add_subparsers(dest="library_command", required=True, metavar="ACTION")
    li = lsub.add_parser(
        "import",
        help="preprocess MSP, sptxt, .dlib or .elib libraries into an on-disk store",
        description="Read NIST MSP, SpectraST sptxt and EncyclopeDIA .dlib/.elib libraries (peptide and "
        "modifications as ProForma, charge, precursor m/z, peaks), add a shuffle-and-reposition decoy per entry, "
        "preprocess every spectrum once (precursor region removed, top peaks, square-root intensities, binned, unit "
        "norm) and write a store sorted by precursor m/z that searches load memory-mapped. Entries that cannot be "
        "used are listed with their number and reason; the rest is imported.",
    )
    li.add_argument("libs", nargs="+", metavar="LIB",
                    help="library files (.msp, .sptxt, each optionally .gz; .dlib, .elib)")
    li.add_argument("--out", required=True, metavar="DIR", help="library folder to write (replaced if one)")
    li.add_argument("--bin-width", type=float, default=1.0005, metavar="TH", help="m/z bin width (default 1.0005)")
    li.add_argument("--top-peaks", type=int, default=150, metavar="N", help="peaks kept per spectrum (default 150)")
    li.add_argument("--precursor-removal", type=float, default=2.0, metavar="DA",
                    help="peaks this close to the precursor m/z are removed (default 2.0)")  # fmt: skip
    li.add_argument("--no-decoys", action="store_true", help="do not add shuffled decoys")
    li.add_argument("--seed", type=int, default=1, help="decoy shuffling seed (default 1)")
    lb = lsub.add_parser(
        "build",
        help="a consensus library (MSP) from your own identifications",
        description="Take the target PSMs at q <= --max-q of a results file (rtsearch search, or a daemon run "
        "file), read their spectra from the runs, merge the replicates of each peptide and charge into a "
        "SpectraST-style consensus spectrum, and write NIST MSP ('rtsearch library import' reads it).",
    )
    lb.add_argument("results", metavar="RESULTS", help="results file (.tsv) with run, scan, peptide, q_value")
    lb.add_argument("runs", nargs="+", metavar="RUN", help="the spectrum files those results came from")
    lb.add_argument("--out", required=True, metavar="LIB.msp", help="library file to write")
    lb.add_argument("--max-q", type=float, default=0.01, help="q-value threshold (default 0.01)")
    lb.add_argument("--peak-tolerance", type=float, default=0.02, metavar="TH",
                    help="replicate peaks this close are one peak (default 0.02; ~0.5 for ion-trap spectra)")
    lb.add_argument("--quorum", type=float, default=0.6,
                    help="share of replicates a consensus peak must appear in (default 0.6)")  # fmt: skip
    lf = lsub.add_parser("info", help="print a library's entries, sources and preprocessing")
    lf.add_argument("dir", metavar="DIR")
    lf.add_argument("--json", action="store_true", help="print the manifest as JSON")


def run(args: argparse.Namespace) -> int:
    """Run ``rtsearch library ACTION``."""
    actions = {"import": _library_import, "build": _library_build, "info": _library_info}
    return actions[args.library_command](args)


def _library_build(args: argparse.Namespace) -> int:
    from rtsearch.library.consensus import build_library

    require_files([args.results, *args.runs], "file")
    require_writable(args.out, "library")
    if not (0 < args.max_q <= 1 and args.peak_tolerance > 0 and 0 < args.quorum <= 1):
        raise InputError("library build: need 0 < --max-q <= 1, --peak-tolerance > 0 and 0 < --quorum <= 1")
    rep = build_library(args.results, args.runs, args.out, max_q=args.max_q, peak_tolerance=args.peak_tolerance,
                        quorum=args.quorum)  # fmt: skip
    skipped = f"; {len(rep.skipped or [])} peptides skipped (modification without a Unimod name)" if rep.skipped else ""
    print(f"{args.out}: {rep.entries:,} consensus entries from {rep.found:,} of {rep.identified:,} identified "
          f"spectra{skipped}")  # fmt: skip
    return 0


def _library_import(args: argparse.Namespace) -> int:
    from rtsearch.library.store import LibraryParams, import_library

    require_files(args.libs, "library file")
    try:
        params = LibraryParams(bin_width=args.bin_width, top_peaks=args.top_peaks,
                               precursor_removal_da=args.precursor_removal, decoys=not args.no_decoys, seed=args.seed)
    except ValueError as e:
        raise InputError(f"library import: {e}") from None  # fmt: skip
    bar = Progress("entries")
    t0 = time.perf_counter()
    report = import_library(args.libs, args.out, params, progress=bar.set)
    bar.close()
    for path, bad in report.malformed:  # every entry left out, with its reason
        print(f"{path}: entry {bad.number} ({bad.name[:60]}): {bad.reason}")
    print(f"{args.out}: {report.read:,} entries read from {len(report.files)} file(s): {report.targets:,} imported, "
          f"{len(report.malformed):,} not imported, {report.decoys:,} decoys added "
          f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip
    return 0


def _library_info(args: argparse.Namespace) -> int:
    from rtsearch.library.store import load_library

    lib = load_library(args.dir)
    m = lib.manifest
    c = m.get("counts", {})
    print_info(m, lambda: [
        ("library", f"{args.dir} (format version {m['version']}, rtsearch {m['rtsearch']})"),
        ("sources", ", ".join(m["sources"])),
        ("entries", f"{c['entries']:,}: {c['targets']:,} target, {c['decoys']:,} decoy ({c['malformed']:,} not "
                    "imported)"),
        ("peaks", f"{c['peaks']:,} ({c['peaks'] / max(c['entries'], 1):.1f} per entry after preprocessing)"),
        *([("precursors", f"m/z {float(lib.precursor_mz[0]):.4f} to {float(lib.precursor_mz[-1]):.4f}")]
          if len(lib) else []),
    ], as_json=args.json)  # fmt: skip
    return 0
