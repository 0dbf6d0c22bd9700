"""``rtsearch-sim``: replay runs or synthetic load to an rtsearch daemon; optionally collect and report."""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from rtsearch.errors import RtsearchError
from rtsearch.protocol.batch import MAX_COUNT
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, SendError, Sent, looped, replay, synthetic

# spectra per message with --rate max (on an H200 with 6 engines: 2,048 0.84-0.98x the engine alone's pace, 1,024
# 0.71-0.81x; docs/history/RESULTS.md 2026-11-29)
MAX_RATE_BATCH = 2048
MAX_RATE_WINDOW = 16_384  # spectra in flight with --rate max (the daemon's queue holds 32,768 by default)
MAX_RATE_BUDGET_MS = 600_000.0

EXAMPLES = """\
examples:
  # the daemon subscribes (rtsearch serve --spectra tcp://127.0.0.1:5555): replay at acquisition speed
  rtsearch-sim replay BSA1.mzML.gz --endpoint tcp://127.0.0.1:5555 --collect tcp://127.0.0.1:5556
  # a PULL daemon (--spectra-mode pull), 2000 spectra/s, three passes, report as JSON
  rtsearch-sim replay run.mzML --mode push --rate 2000 --loop 3 --collect tcp://127.0.0.1:5556 --json out.json
  # a recorded run as fast as the daemon takes it, 2048 spectra a message, answers in batches
  rtsearch-sim replay run.mgf --mode push --rate max --loop 30 --collect tcp://127.0.0.1:5556
  # synthetic load: real spectra cycled at 20,000/s for 10 minutes
  rtsearch-sim load run.mzML --rate 20000 --duration 600 --collect tcp://127.0.0.1:5556
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rtsearch-sim", description=__doc__, epilog=EXAMPLES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(s: argparse.ArgumentParser) -> None:
        s.add_argument("runs", nargs="+", metavar="RUN",
                       help="mzML, mzXML, MGF, msalign (top-down; each may be .gz) or ms2 files")
        s.add_argument("--endpoint", default="tcp://127.0.0.1:5555",
                       help="spectra endpoint: bound here in pub mode, the daemon's in push mode")
        s.add_argument("--mode", choices=["pub", "push"], default="pub",
                       help="pub: bind XPUB for a subscribing daemon (default); push: connect to a PULL daemon")
        s.add_argument("--collect", metavar="ENDPOINT", help="subscribe to the daemon's results and report")
        s.add_argument("--json", type=Path, metavar="OUT", help="write the report as JSON")
        s.add_argument("--budget-ms", type=float, help="per-spectrum latency budget sent in each header")
        s.add_argument("--wait", type=float, default=30.0, metavar="S",
                       help="seconds to wait for the daemon to connect, and for its last results (default 30)")

    r = sub.add_parser("replay", help="replay recorded runs (MS1 and MS2, run.start/run.end)")
    common(r)
    pace = r.add_mutually_exclusive_group()
    pace.add_argument("--speed", type=float, default=None, help="multiple of acquisition speed (default 1.0)")
    pace.add_argument("--rate", type=_rate, default=None, metavar="HZ",
                      help="fixed spectra per second instead, or 'max': as fast as the daemon takes them (sent in "
                      f"batches of --batch, default {MAX_RATE_BATCH} then)")
    r.add_argument("--batch", type=int, default=None, metavar="N",
                   help="spectra per message: N > 1 sends 'spectra' messages of up to N spectra, answered in "
                   "'batch.results' messages (docs/protocol.md); default 1, or "
                   f"{MAX_RATE_BATCH} with --rate max")
    r.add_argument("--window", type=int, default=None, metavar="N",
                   help="at most N MS2 spectra sent and not yet answered (needs --collect); default "
                   f"{MAX_RATE_WINDOW:,} with --rate max, none otherwise. With --rate max and no --budget-ms, each "
                   f"spectrum carries a budget of {MAX_RATE_BUDGET_MS / 1000:.0f} s: a bulk replay wants every "
                   "spectrum scored, not shed for latency")
    r.add_argument("--loop", type=int, default=1, metavar="N", help="replay the files N times (passes >1 are runs "
                   "named <run>.loopN)")
    lo = sub.add_parser("load", help="synthetic load: the runs' MS2 spectra cycled at a fixed rate")
    common(lo)
    lo.add_argument("--rate", type=float, required=True, metavar="HZ", help="spectra per second")
    g = lo.add_mutually_exclusive_group()
    g.add_argument("--duration", type=float, metavar="S", help="seconds of load")
    g.add_argument("--count", type=int, metavar="N", help="spectra to send")
    lo.add_argument("--run-size", type=int, default=10_000, help="spectra per synthetic run (default 10000)")
    return p


def _rate(text: str) -> float:
    if text.strip().lower() == "max":
        return math.inf
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected spectra per second or 'max', got {text!r}") from None


def _check(args: argparse.Namespace) -> None:
    for f in args.runs:
        if not Path(f).is_file():
            raise SendError(f"{f}: spectrum file not found")
    if getattr(args, "rate", None) is not None and not args.rate > 0:
        raise SendError("--rate must be positive")
    if getattr(args, "speed", None) is not None and not args.speed > 0:
        raise SendError("--speed must be positive")
    if getattr(args, "loop", 1) < 1:
        raise SendError("--loop must be at least 1")
    if getattr(args, "batch", None) is not None and not 1 <= args.batch <= MAX_COUNT:
        raise SendError(f"--batch must be 1..{MAX_COUNT:,}")
    if getattr(args, "window", None) is not None and args.window < 0:
        raise SendError("--window must be >= 0")


def run(args: argparse.Namespace) -> int:
    _check(args)
    runs: Iterable[tuple[str, list]]
    if args.command == "replay":
        runs = looped(args.runs, args.loop)
        speed = None if args.rate else (args.speed or 1.0)
        rate = args.rate
        batch = args.batch or (MAX_RATE_BATCH if rate == math.inf else 1)
        window = args.window if args.window is not None else (MAX_RATE_WINDOW if rate == math.inf else 0)
        if window and not args.collect:
            raise SendError("--window (and --rate max, which sends with a window) needs --collect: answers open it")
        if rate == math.inf and args.budget_ms is None:
            args.budget_ms = MAX_RATE_BUDGET_MS
    else:
        total = args.count if args.count else int(args.rate * (args.duration or 60))
        runs = synthetic(args.runs, total=total, run_size=args.run_size)
        speed, rate, batch, window = None, args.rate, 1, 0
    collector = Collector(args.collect).start() if args.collect else None
    sent = Sent()
    try:
        with Sender(args.endpoint, mode=args.mode, wait_s=args.wait) as sender:
            print(f"sending to {sender.endpoint} ({args.mode})", file=sys.stderr)
            replay(sender, runs, speed=speed, rate=rate, budget_ms=args.budget_ms, sent=sent, batch=batch,
                   window=window, answered=collector.count if collector is not None else None)
        print(f"sent {sent.total:,} spectra ({len(sent.ms2):,} MS2) in {len(sent.runs)} run(s)", file=sys.stderr)
        if collector is None:
            return 0
        collector.wait(len(sent.ms2), idle_s=args.wait, timeout_s=max(60.0, 10 * args.wait))
    finally:
        if collector is not None:
            collector.stop()
    report = collector.report(sent.ms2, first_ns=sent.first_ns)
    print(report)
    if args.json:
        args.json.write_text(json.dumps(report.as_dict(), indent=2))
    return 0 if report.lost == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except (SendError, RtsearchError) as e:
        print(f"rtsearch-sim: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rtsearch-sim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
