"""Command line: ``rtsearch index build|info``, ``library ...`` (`rtsearch.cli.library`), ``search``, ``serve``, ``demo``.

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
from typing import TYPE_CHECKING

from rtsearch import __version__
from rtsearch.cli.library import add_library_parser, library_command, library_engine, search_library
from rtsearch.cli.progress import Progress
from rtsearch.config import Config, load_config, resolved_dict
from rtsearch.errors import InputError, RtsearchError
from rtsearch.scoring.backend import get_backend

if TYPE_CHECKING:
    from rtsearch.scoring.database.engine import SearchEngine

log = logging.getLogger("rtsearch")

EXAMPLES = """\
examples:
  rtsearch index build --fasta ecoli.fasta --config search.toml --out ecoli.idx
  rtsearch index info ecoli.idx
  rtsearch search Ecoli_MS2_small.mzML --index ecoli.idx --config search.toml -o results.tsv
  rtsearch serve --index ecoli.idx --config search.toml --mqtt 127.0.0.1:1883 --instrument orbitrap1
  rtsearch demo
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

    add_library_parser(sub)
    s = sub.add_parser(
        "search",
        help="search spectrum files offline",
        description="Search every MS2 spectrum of mzML (.gz), MGF or ms2 files; one row per spectrum.",
    )
    s.add_argument("runs", nargs="+", metavar="RUN", help="spectrum files")
    target = s.add_mutually_exclusive_group(required=True)
    target.add_argument("--index", metavar="DIR", help="index built by 'rtsearch index build'")
    target.add_argument("--library", metavar="DIR",
                        help="spectral library imported by 'rtsearch library import' (rows gain library_id, "
                        "dot, dot_bias, delta_dot, f_value)")  # fmt: skip
    s.add_argument("--open", action="store_true",
                   help="with --library: open-modification search, every entry within +-500 Da of the precursor "
                   "mass (precursor_mz - calc_mz, times the charge, is then the modification's mass)")  # fmt: skip
    s.add_argument("--config", metavar="TOML", help="[search] settings; a [database] table must match the index")
    s.add_argument("--backend", default="auto", choices=["auto", "cupy", "numpy"], help="compute backend")
    s.add_argument("-o", "--output", required=True, metavar="FILE", help="results file (.tsv or .parquet)")
    s.add_argument("--batch-size", type=int, default=1024, metavar="N", help="spectra per engine batch (default 1024)")

    d = sub.add_parser(
        "serve",
        help="run the real-time daemon",
        description="Subscribe to a ZeroMQ stream of spectra (wire protocol v1, docs/protocol.md), score them in "
        "micro-batches and publish one result per MS2 spectrum on ZeroMQ (and MQTT); write each run's results "
        "file at run.end. Flags override the [serve] table of --config. Stop with SIGINT or SIGTERM.",
    )
    d_target = d.add_mutually_exclusive_group(required=True)
    d_target.add_argument("--index", metavar="DIR", help="index built by 'rtsearch index build'")
    d_target.add_argument("--library", metavar="DIR",
                          help="spectral library imported by 'rtsearch library import' (results gain library_id, "
                          "dot, dot_bias, delta_dot, f_value)")  # fmt: skip
    d.add_argument("--open", action="store_true",
                   help="with --library: open-modification search, every entry within +-500 Da of the precursor")
    d.add_argument("--config", metavar="TOML", help="[search] and [serve] settings")
    d.add_argument("--spectra", metavar="ENDPOINT", help="spectra endpoint (default tcp://127.0.0.1:5555)")
    d.add_argument("--spectra-mode", choices=["sub", "pull"],
                   help="sub: connect to the instrument's PUB (default); pull: bind, for lossless PUSH feeds")
    d.add_argument("--results", metavar="ENDPOINT", help="results PUB, bound (default tcp://127.0.0.1:5556)")
    d.add_argument("--metrics-port", type=int, metavar="PORT", help="Prometheus /metrics port (default 9108; 0: any)")
    d.add_argument("--mqtt", metavar="HOST:PORT", help="publish identifications and run summaries to this broker")
    d.add_argument("--instrument", metavar="NAME", help="instrument name in MQTT topics (default 'instrument')")
    d.add_argument("--budget-ms", type=float, metavar="MS", help="default per-spectrum latency budget (default 100)")
    d.add_argument("--backend", choices=["auto", "cupy", "numpy"], help="compute backend (default auto)")
    d.add_argument("--results-dir", metavar="DIR", help="folder for each run's results file (default rtsearch-results)")
    d.add_argument("--workers", type=int, metavar="N",
                   help="engine worker threads, each with its own CUDA stream (default 1; see bench/RESULTS.md)")
    d.add_argument("--max-batch", type=int, metavar="N", help="spectra per micro-batch at most (default 4096)")

    e = sub.add_parser(
        "demo",
        help="the embedded default: daemon + simulator on the bundled E. coli run",
        description="Build (or load from the cache) the index of the bundled E. coli database, start the daemon "
        "and the simulator in this process on free loopback ports, replay the bundled real run and print "
        "identifications as they arrive, then a summary. Needs no GPU and no broker.",
    )
    e.add_argument("--rate", type=float, default=200.0, metavar="HZ", help="spectra per second sent (default 200)")
    e.add_argument("--out", default="demo-out", metavar="DIR", help="folder for the results file (default demo-out)")
    e.add_argument("--cache", metavar="DIR", help="index cache folder (default ~/.cache/rtsearch)")
    e.add_argument("--backend", default="auto", choices=["auto", "cupy", "numpy"], help="compute backend")
    e.add_argument("--mqtt", metavar="HOST:PORT", help="also publish to this MQTT broker")
    e.add_argument("--quiet", action="store_true", help="print only the summary")
    return p


def _serve(args: argparse.Namespace) -> int:
    import asyncio
    import dataclasses
    import signal

    from rtsearch.config import validate_serve
    from rtsearch.database.store import load_index
    from rtsearch.scoring.database.engine import Engine
    from rtsearch.serve.daemon import Daemon

    cfg: Config = load_config(args.config)
    flags = {
        "spectra": args.spectra, "spectra_mode": args.spectra_mode, "results": args.results,
        "metrics_port": args.metrics_port, "mqtt": args.mqtt, "instrument": args.instrument,
        "budget_ms": args.budget_ms, "backend": args.backend, "results_dir": args.results_dir,
        "workers": args.workers, "max_batch": args.max_batch,
    }  # fmt: skip
    serve = dataclasses.replace(cfg.serve, **{k: v for k, v in flags.items() if v is not None})
    if serve.max_queue < serve.max_batch:
        serve = dataclasses.replace(serve, max_queue=8 * serve.max_batch)
    validate_serve(serve)
    if args.open and not args.library:
        raise InputError("--open applies to library search (--library)")
    backend = get_backend(serve.backend)
    log.info("backend %s (%s); serve settings %s", backend.name, backend.device, resolved_dict(serve))
    engine: SearchEngine
    if args.library:
        engine = library_engine(args, cfg, backend)
    else:
        index = load_index(args.index, expect=cfg.database if cfg.database_given else None)
        engine = Engine(index, cfg.search, backend)

    async def go() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await Daemon(engine, serve).run(stop)

    asyncio.run(go())
    return 0


def _index_build(args: argparse.Namespace) -> int:
    from rtsearch.database.build import build_index
    from rtsearch.database.store import file_record, save_index

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
    from rtsearch.database.store import read_manifest

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
    from rtsearch.database.store import load_index
    from rtsearch.search.offline import search_runs, write_table

    cfg: Config = load_config(args.config)
    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    out = Path(args.output)
    if out.suffix.lower() not in (".tsv", ".parquet"):
        raise InputError(f"{out}: output must end in .tsv or .parquet")
    for r in args.runs:
        if not Path(r).is_file():
            raise InputError(f"{r}: spectrum file not found")
    if args.library:
        return search_library(args, cfg, out)
    if args.open:
        raise InputError("--open applies to library search (--library)")
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
    quiet = logging.INFO if args.command == "serve" else logging.WARNING  # a daemon says what it does
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else quiet,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "index":
            return _index_build(args) if args.index_command == "build" else _index_info(args)
        if args.command == "library":
            return library_command(args)
        if args.command == "search":
            return _search(args)
        if args.command == "serve":
            return _serve(args)
        if args.command == "demo":
            from rtsearch.cli.demo import run_demo

            return run_demo(args)
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
