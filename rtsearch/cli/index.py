"""``rtsearch index build|info``: a FASTA database into an on-disk peptide index, and what one holds."""

from __future__ import annotations

import argparse
import time
from typing import Any

from rtsearch.cli.progress import Progress
from rtsearch.cli.stores import print_info, require_files
from rtsearch.cli.target import add_backend_argument, backend_of
from rtsearch.config import load_config


def add_parser(sub: Any) -> None:
    """The ``index`` command and its actions, on the subparsers ``sub`` of the ``rtsearch`` parser."""
    idx = sub.add_parser("index", help="build or inspect a peptide index")
    isub = idx.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    b = isub.add_parser(
        "build",
        help="digest FASTA files into an on-disk index",
        description="Digest proteins, add decoys and modifications, build the fragment index, "
        "and write it to a folder that searches load memory-mapped.",
    )
    b.add_argument("--fasta", nargs="+", action="extend", required=True, metavar="FASTA",
                   help="protein databases (several after one --fasta, or --fasta again: all are read)")
    b.add_argument("--config", metavar="TOML", help="[database] settings (defaults: trypsin, 2 missed cleavages, ...)")
    b.add_argument("--out", required=True, metavar="DIR", help="index folder to write (replaced if it is an index)")
    b.add_argument("--strict", action="store_true",
                   help="refuse a modification on a site Unimod does not list for it (Phospho@W; otherwise a warning)")
    add_backend_argument(b)
    i = isub.add_parser("info", help="print an index's parameters and sizes")
    i.add_argument("dir", metavar="DIR")
    i.add_argument("--json", action="store_true", help="print the manifest as JSON")


def run(args: argparse.Namespace) -> int:
    return _build(args) if args.index_command == "build" else _info(args)


def _build(args: argparse.Namespace) -> int:
    from rtsearch.database.build import build_index
    from rtsearch.database.mods import refuse_unlisted
    from rtsearch.database.store import file_record, save_index

    cfg = load_config(args.config)
    if args.strict:
        refuse_unlisted(cfg.database.fixed_mods + cfg.database.variable_mods)
    require_files(args.fasta, "FASTA file")
    backend = backend_of(args, cfg)
    t0 = time.perf_counter()
    bars: dict[str, Progress] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            for bar in bars.values():
                bar.close()
            bars.clear()
            bars[stage] = Progress(stage, total)
        bars[stage].set(done, total)

    index = build_index(
        args.fasta, cfg.database, xp=backend.xp, progress=progress, input_hashes=[file_record(f) for f in args.fasta]
    )
    for bar in bars.values():
        bar.close()
    save_index(index, args.out)
    c = index.manifest["counts"]
    secs = time.perf_counter() - t0
    print(
        f"index {args.out}: {c['proteins']:,} proteins, {c['target_peptides']:,} target and "
        f"{c['decoy_peptides']:,} decoy peptides, {c['fragments']:,} fragments, "
        f"{index.nbytes() / 1e6:,.1f} MB, {secs:.1f} s"
    )
    return 0


def _info(args: argparse.Namespace) -> int:
    from rtsearch.database.store import read_manifest

    m = read_manifest(args.dir)
    c = m.get("counts", {})
    print_info(m, lambda: [
        ("index", f"{args.dir} (format {m['format_version']}, rtsearch {m['rtsearch_version']})"),
        ("inputs", ", ".join(i["name"] for i in m["inputs"])),
        ("proteins", f"{c['proteins']:,}"),
        ("peptides", f"{c['target_peptides']:,} target, {c['decoy_peptides']:,} decoy"),
        ("fragments", f"{c['fragments']:,} (buckets of {m['bucket_size']})"),
        ("size", f"{m['bytes'] / 1e6:,.1f} MB, built in {m['build_seconds']:.1f} s"),
    ], as_json=args.json)  # fmt: skip
    return 0
