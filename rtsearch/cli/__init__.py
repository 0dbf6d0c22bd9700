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
from typing import NoReturn

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


GLOBAL_FLAGS = ("-v", "--verbose", "--debug")  # with --log-format: accepted before or after the subcommand


def global_first(argv: Sequence[str]) -> list[str]:
    """``argv`` with the options every command takes (`GLOBAL_FLAGS`, ``--log-format``) moved to the front, where
    the top-level parser reads them: ``rtsearch search … --log-format json`` works as ``rtsearch --log-format json
    search …``. Nothing after ``--`` moves."""
    front: list[str] = []
    rest: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest += args[i:]
            break
        if a in GLOBAL_FLAGS or a.startswith("--log-format="):
            front.append(a)
        elif a == "--log-format" and i + 1 < len(args):
            front += args[i : i + 2]
            i += 1
        else:
            rest.append(a)
        i += 1
    return front + rest


def log_format_of(argv: Sequence[str]) -> str:
    """The ``--log-format`` ``argv`` asks for (the last given), before it is parsed: "text" unless "json"."""
    fmt = "text"
    for i, a in enumerate(argv):
        if a.startswith("--log-format="):
            fmt = a.split("=", 1)[1]
        elif a == "--log-format" and i + 1 < len(argv):
            fmt = argv[i + 1]
    return "json" if fmt == "json" else "text"


def say_error(message: str, log_format: str) -> None:
    """The command's last line, ``rtsearch: <message>`` on stderr: plain, or a JSON log line (``--log-format
    json``: every line a log collector reads is JSON)."""
    if log_format == "json":
        print(logs.JsonFormatter().format(logging.makeLogRecord(
            {"name": "rtsearch", "levelno": logging.ERROR, "levelname": "ERROR", "msg": message})),
            file=sys.stderr)  # fmt: skip
    else:
        print(f"rtsearch: {message}", file=sys.stderr)


def parser(log_format: str = "text") -> argparse.ArgumentParser:
    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:  # a usage error: its usage and one line, or one JSON line
            if log_format != "json":
                super().error(message)
            say_error(f"error: {self.prog}: {message}", log_format)
            sys.exit(2)

    p = Parser(
        prog="rtsearch",
        description="Real-time peptide identification for tandem mass spectrometry.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"rtsearch {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log more detail (here or after the command)")
    p.add_argument("--debug", action="store_true",
                   help="show tracebacks for internal errors (here or after the command)")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="log lines, and the last error line, as text (default) or one JSON object each (time, level, "
                   "logger, message); here or after the command")  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    fmt = log_format_of(given)
    args = parser(fmt).parse_args(global_first(given))
    args.argv = ["rtsearch", *given]  # as given: provenance records it
    quiet = logging.INFO if args.command == "serve" else logging.WARNING  # a daemon says what it does
    logs.configure(logging.DEBUG if args.verbose else quiet, args.log_format)
    try:
        rc = COMMANDS[args.command].run(args)
        if argv is None and args.command in ("search", "index") and not _profiled():
            _exit_now(rc)
        return rc
    except RtsearchError as e:
        say_error(f"error: {e}", fmt)
        return e.exit_code
    except KeyboardInterrupt:
        say_error("interrupted", fmt)
        if argv is None and args.command in ("search", "index"):
            _exit_now(130)  # not waiting, at the interpreter's exit, for a scorer thread to finish its batch
        return 130
    except MemoryError:
        say_error("error: out of memory; try a smaller --batch-size", fmt)
        return 1
    except Exception as e:  # an internal error: one line unless --debug
        if args.debug:
            raise
        say_error(f"internal error: {type(e).__name__}: {e} (run with --debug for details)", fmt)
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
