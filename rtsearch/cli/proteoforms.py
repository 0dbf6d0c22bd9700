"""``rtsearch proteoforms build|info``: FASTA proteins into an on-disk top-down database, and what one holds."""

from __future__ import annotations

import argparse
import time
from typing import Any

from rtsearch.cli.stores import print_info, require_files
from rtsearch.config import load_config
from rtsearch.errors import InputError


def add_parser(sub: Any) -> None:
    """The ``proteoforms`` command and its actions, on the subparsers ``sub`` of the ``rtsearch`` parser."""
    top = sub.add_parser("proteoforms", help="build or inspect a top-down proteoform database")
    psub = top.add_subparsers(dest="proteoforms_command", required=True, metavar="ACTION")
    b = psub.add_parser(
        "build", help="FASTA proteins into an on-disk proteoform database",
        description="Turn proteins into prefix-mass arrays with their N-terminal forms (initiator Met cleaved or "
        "not, acetylated or not) and shuffled DECOY_ proteins, with the known PTMs a top-down search may place; "
        "write them to a folder that searches load memory-mapped. Settings: the [proteoforms] table of --config.",
    )  # fmt: skip
    b.add_argument("--fasta", nargs="+", action="extend", required=True, metavar="FASTA",
                   help="protein databases (several after one --fasta, or --fasta again: all are read)")
    b.add_argument("--config", metavar="TOML", help="[proteoforms] settings (defaults: the four N-terminal forms, "
                   "Acetyl@K Phospho@STY Oxidation@M Methyl@KR Dimethyl@KR, shuffled decoys)")  # fmt: skip
    b.add_argument("--out", required=True, metavar="DIR", help="folder to write (replaced if it is one)")
    b.add_argument("--strict", action="store_true",
                   help="refuse a modification on a site Unimod does not list for it (Phospho@W; otherwise a warning)")
    i = psub.add_parser("info", help="print a proteoform database's parameters and sizes")
    i.add_argument("dir", metavar="DIR")
    i.add_argument("--json", action="store_true", help="print the manifest as JSON")


def run(args: argparse.Namespace) -> int:
    return _build(args) if args.proteoforms_command == "build" else _info(args)


def _build(args: argparse.Namespace) -> int:
    from rtsearch.database.fasta import read_fastas
    from rtsearch.database.store import file_record
    from rtsearch.proteoforms.database import build_proteoforms
    from rtsearch.proteoforms.store import save_proteoforms

    cfg = load_config(args.config).proteoforms
    if args.strict:
        from rtsearch.database.mods import refuse_unlisted

        refuse_unlisted(cfg.fixed_mods + cfg.known_ptms)
    require_files(args.fasta, "FASTA file")
    t0 = time.perf_counter()
    db = build_proteoforms(read_fastas(args.fasta), cfg)
    if not db.counts["proteins"]:
        raise InputError(f"{', '.join(args.fasta)}: no protein usable (every one empty, too long or with residues "
                         "of no defined mass)")  # fmt: skip
    secs = time.perf_counter() - t0
    save_proteoforms(db, args.out, inputs=[file_record(f) for f in args.fasta], build_seconds=secs)
    c = db.counts
    print(f"proteoforms {args.out}: {c['proteins']:,} proteins, {c['decoys']:,} decoys, {c['forms']:,} N-terminal "
          f"forms, {len(db.known.names)} known PTMs; left out {c['left_out_ambiguous']:,} with B/J/X/Z and "
          f"{c['left_out_too_long']:,} too long; {secs:.1f} s")  # fmt: skip
    return 0


def _info(args: argparse.Namespace) -> int:
    from rtsearch.proteoforms.store import read_manifest

    m = read_manifest(args.dir)
    c = m.get("counts", {})
    print_info(m, lambda: [
        ("proteoforms", f"{args.dir} (format {m['format_version']}, rtsearch {m['rtsearch_version']})"),
        ("inputs", ", ".join(i["name"] for i in m["inputs"])),
        ("proteins", f"{c['proteins']:,} targets, {c['decoys']:,} decoys, {c['forms']:,} N-terminal forms"),
        ("left out", f"{c['left_out_ambiguous']:,} with B/J/X/Z, {c['left_out_too_long']:,} too long"),
        ("known PTMs", ", ".join(f"{k} ({v:+.4f})" for k, v in m["known_shifts"].items()) or "none"),
        ("size", f"{m['bytes'] / 1e6:,.1f} MB, built in {m['build_seconds']:.1f} s"),
    ], as_json=args.json)  # fmt: skip
    return 0
