"""Command line: ``rtsearch index|library|proteoforms|search|serve|features|export|demo``, one module per command group.

Each command module adds its parser (``add_parser``) and runs its command (``run``).
This is the only place that turns `RtsearchError` into exit codes and configures
logging: every error a user can cause is one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from rtsearch import __version__, logs
from rtsearch.cli import demo, export, features, index, library, proteoforms, search, serve
from rtsearch.errors import RtsearchError

COMMANDS = {"index": index, "library": library, "proteoforms": proteoforms, "search": search, "serve": serve,
            "features": features, "export": export, "demo": demo}

EXAMPLES = """\
examples:
  rtsearch index build --fasta ecoli.fasta --config search.toml --out ecoli.idx
  rtsearch index info ecoli.idx
  rtsearch proteoforms build --fasta ecoli.fasta --out ecoli.pf
  rtsearch search Ecoli_MS2_small.mzML --index ecoli.idx --config search.toml -o results.tsv
  rtsearch serve --index ecoli.idx --config search.toml --mqtt 127.0.0.1:1883 --instrument orbitrap1
  rtsearch library import nist-bsa_consensus.msp --out bsa.lib
  rtsearch search BSA1.mzML.gz --library bsa.lib -o bsa-lib.tsv
  rtsearch features BSA1.mzML.gz -o bsa1-features.tsv
  rtsearch export results.tsv --to pin -o results.pin
  rtsearch demo
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rtsearch",
        description="Real-time peptide identification for tandem mass spectrometry.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"rtsearch {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log more detail")
    p.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="log lines as text (default) or one JSON object each (time, level, logger, message)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.argv = ["rtsearch", *(sys.argv[1:] if argv is None else argv)]  # as given: provenance records it
    quiet = logging.INFO if args.command == "serve" else logging.WARNING  # a daemon says what it does
    logs.configure(logging.DEBUG if args.verbose else quiet, args.log_format)
    try:
        rc = COMMANDS[args.command].run(args)
        if argv is None and args.command in ("search", "index") and not _profiled():
            _exit_now(rc)
        return rc
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


def _profiled() -> bool:
    """Whether a profiler runs this process (``python -m cProfile -o FILE -m rtsearch.cli …``): it writes its file
    at the interpreter's exit, which `_exit_now` would skip."""
    main = sys.modules.get("__main__")
    return sys.getprofile() is not None or getattr(getattr(main, "__spec__", None), "name", "") == "cProfile"


def _exit_now(rc: int) -> None:
    """End the process without the interpreter's teardown (CuPy's, the GPU context's, every object's): a search's
    results are written and closed and its reader processes told to stop, and the process took 0.21-0.37 s
    more to exit after its summary, of a 3-4 s search (docs/history/RESULTS.md); an index build's folder is written
    and renamed into place. Only for the command run as the process (``argv`` None)."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(rc)


if __name__ == "__main__":
    sys.exit(main())
