"""``rtsearch export``: a results file in the field's interchange formats (`rtsearch.io.export`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rtsearch.cli.stores import require_files, require_writable
from rtsearch.errors import InputError
from rtsearch.io.export import export


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "export", help="write a results file as psm_utils TSV, Percolator PIN or mzIdentML",
        description="Write the matched spectra of an rtsearch results file (rtsearch search -o, or a daemon's run "
        "file; .tsv or .parquet) in an interchange format: 'psm_utils' (psm_utils' TSV: ms2rescore, psm_utils "
        "convert), 'pin' (Percolator's input: Percolator, mokapot), 'mzid' (mzIdentML 1.2: PRIDE, quantms, "
        "PeptideShaker). Spectra are identified as scan=N.",
    )  # fmt: skip
    p.add_argument("results", metavar="RESULTS", help="rtsearch results file (.tsv or .parquet)")
    p.add_argument("--to", required=True, choices=("psm_utils", "pin", "mzid"), help="the format to write")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="where to write it")


_TEXT = {"psm_utils": "psm_utils' TSV, .tsv", "pin": "Percolator's tab-separated PIN, .pin", "mzid": "mzIdentML, .mzid"}


def run(args: argparse.Namespace) -> int:
    require_files([args.results], "results file")
    if Path(args.out).suffix.lower() == ".parquet":  # each format is one text file; a .parquet of TSV misleads
        raise InputError(f"{args.out}: --to {args.to} writes text ({_TEXT[args.to]}), not Parquet: name it so")
    require_writable(args.out, args.to, folders=True)
    n = export(args.results, args.out, args.to)
    print(f"{args.out}: {n:,} matched spectra as {args.to}")
    return 0
