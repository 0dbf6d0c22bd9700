"""Command line: ``rtsearch index build|info``, ``rtsearch search``.

The only module that turns `RtsearchError` into exit codes and configures
logging. Every error a user can cause is one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rtsearch import __version__
from rtsearch.backend import get_backend
from rtsearch.config import Config, load_config, resolved_dict
from rtsearch.errors import InputError, RtsearchError
from rtsearch.progress import Progress

log = logging.getLogger("rtsearch")

EXAMPLES = """\
examples:
  rtsearch index build --fasta ecoli.fasta --config search.toml --out ecoli.idx
  rtsearch index info ecoli.idx
  rtsearch search Ecoli_MS2_small.mzML --index ecoli.idx --config search.toml -o results.tsv
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rtsearch",
        description="Real-time peptide identification for tandem mass spectrometry.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"rtsearch {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log more detail")
    p.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    idx = sub.add_parser("index", help="build or inspect a peptide index")
    isub = idx.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    b = isub.add_parser(
        "build",
        help="digest FASTA files into an on-disk index",
        description="Digest proteins, add decoys and modifications, build the fragment index, "
        "and write it to a folder that searches load memory-mapped.",
    )
    b.add_argument("--fasta", nargs="+", required=True, metavar="FASTA", help="protein databases")
    b.add_argument("--config", metavar="TOML", help="[database] settings (defaults: trypsin, 2 missed cleavages, ...)")
    b.add_argument("--out", required=True, metavar="DIR", help="index folder to write (replaced if it is an index)")
    b.add_argument("--backend", default="auto", choices=["auto", "cupy", "numpy"], help="where to sort (default auto)")
    i = isub.add_parser("info", help="print an index's parameters and sizes")
    i.add_argument("dir", metavar="DIR")
    i.add_argument("--json", action="store_true", help="print the manifest as JSON")

    s = sub.add_parser(
        "search",
        help="search spectrum files offline",
        description="Search every MS2 spectrum of mzML (.gz), MGF or ms2 files; one row per spectrum.",
    )
    s.add_argument("runs", nargs="+", metavar="RUN", help="spectrum files")
    s.add_argument("--index", required=True, metavar="DIR", help="index built by 'rtsearch index build'")
    s.add_argument("--config", metavar="TOML", help="[search] settings; a [database] table must match the index")
    s.add_argument("--backend", default="auto", choices=["auto", "cupy", "numpy"], help="compute backend")
    s.add_argument("-o", "--output", required=True, metavar="FILE", help="results file (.tsv or .parquet)")
    s.add_argument("--batch-size", type=int, default=1024, metavar="N", help="spectra per engine batch (default 1024)")
    return p


def _index_build(args: argparse.Namespace) -> int:
    from rtsearch.index.build import build_index
    from rtsearch.index.store import file_record, save_index

    cfg = load_config(args.config)
    for f in args.fasta:
        if not Path(f).is_file():
            raise InputError(f"{f}: FASTA file not found")
    backend = get_backend(args.backend)
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


def _index_info(args: argparse.Namespace) -> int:
    from rtsearch.index.store import read_manifest

    m = read_manifest(args.dir)
    if args.json:
        print(json.dumps(m, indent=2))
        return 0
    c = m["counts"]
    print(f"index        {args.dir} (format {m['format_version']}, rtsearch {m['rtsearch_version']})")
    print(f"inputs       {', '.join(i['name'] for i in m['inputs'])}")
    print(f"proteins     {c['proteins']:,}")
    print(f"peptides     {c['target_peptides']:,} target, {c['decoy_peptides']:,} decoy")
    print(f"fragments    {c['fragments']:,} (buckets of {m['bucket_size']})")
    print(f"size         {m['bytes'] / 1e6:,.1f} MB, built in {m['build_seconds']:.1f} s")
    for k, v in m["params"].items():
        print(f"  {k:<26} {v}")
    return 0


def _search(args: argparse.Namespace) -> int:
    from rtsearch.index.store import load_index
    from rtsearch.offline import search_runs, write_table

    cfg: Config = load_config(args.config)
    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    out = Path(args.output)
    if out.suffix.lower() not in (".tsv", ".parquet"):
        raise InputError(f"{out}: output must end in .tsv or .parquet")
    for r in args.runs:
        if not Path(r).is_file():
            raise InputError(f"{r}: spectrum file not found")
    index = load_index(args.index, expect=cfg.database if cfg.database_given else None)
    backend = get_backend(args.backend)
    log.info("backend %s (%s); search settings %s", backend.name, backend.device, resolved_dict(cfg.search))
    bar = Progress("search", unit="spectra")
    table, summary = search_runs(
        args.runs, index, cfg.search, backend, batch_size=args.batch_size,
        progress=lambda done, total: bar.set(done, total),
    )  # fmt: skip
    bar.close()
    n = write_table(table, out)
    print(f"{out}: {n:,} rows; {summary}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "index":
            return _index_build(args) if args.index_command == "build" else _index_info(args)
        if args.command == "search":
            return _search(args)
    except RtsearchError as e:
        print(f"rtsearch: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("rtsearch: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("rtsearch: error: out of memory; try a smaller --batch-size", file=sys.stderr)
        return 1
    except Exception as e:  # an internal error: one line unless --debug
        if args.debug:
            raise
        print(f"rtsearch: internal error: {type(e).__name__}: {e} (run with --debug for details)", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
