"""``rtsearch search``: spectrum files against an index or a library, offline; one results file."""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import time
from pathlib import Path
from typing import Any

from rtsearch.cli.progress import Progress
from rtsearch.cli.stores import require_writable
from rtsearch.cli.target import add_backend_argument, add_target_arguments, backend_of, open_target
from rtsearch.config import load_config, resolved_dict, with_search
from rtsearch.errors import InputError
from rtsearch.matches import Scorer
from rtsearch.search.offline import BATCH_SIZE
from rtsearch.search.target import SearchTarget

log = logging.getLogger(__name__)


def add_parser(sub: Any) -> None:
    """The ``search`` command, on the subparsers ``sub`` of the ``rtsearch`` parser."""
    s = sub.add_parser(
        "search",
        help="search spectrum files offline",
        description="Search every MS2 spectrum of mzML, mzXML, MGF or msalign (each may be .gz) or ms2 files; one row "
        "per spectrum.",
    )
    s.add_argument("runs", nargs="+", metavar="RUN", help="spectrum files")
    add_target_arguments(s, rows="rows")
    s.add_argument("--config", metavar="TOML",
                   help="[search] and [library] settings; a [database] table must match the index")  # fmt: skip
    add_backend_argument(s)
    s.add_argument("-o", "--output", required=True, metavar="FILE", help="results file (.tsv or .parquet)")
    s.add_argument("--batch-size", type=int, default=BATCH_SIZE, metavar="N",
                   help=f"spectra per engine batch (default {BATCH_SIZE})")
    s.add_argument("--ms1", action="store_true",
                   help="add each identified precursor's MS1 elution (columns ms1_apex_rt, ms1_area) from the run's "
                   "MS1 scans (mzML, mzXML): Savitzky-Golay smoothed features, as 'rtsearch features' finds them")
    s.add_argument("--ranks", type=int, metavar="N",
                   help="matches written a spectrum, best first (database search; default: [search] ranks, 1); ranks "
                   "below the first carry the run's score but no q-value or PEP (for rescoring elsewhere)")
    s.add_argument("--readers", type=int, metavar="N",
                   help="worker processes parsing a large plain MGF or mzML (default: one for every two CPUs; 0: none)")
    s.add_argument("--processes", type=int, metavar="N",
                   help="top-down search on the CPU (seconds a spectrum): processes scoring spectra side by side "
                   "(default: one a CPU; 1: this process alone)")


def run(args: argparse.Namespace) -> int:
    from rtsearch.io import provenance
    from rtsearch.io.provenance import InputHashes
    from rtsearch.io.results import write_table
    from rtsearch.scoring.backend import start_driver
    from rtsearch.search.offline import SpectrumReader, search_runs

    cfg = load_config(args.config)
    if args.ranks is not None:
        if args.ranks > 1 and not args.index:
            raise InputError("--ranks applies to database search (--index): a library or proteoform search writes "
                             "each spectrum's best match")
        cfg = with_search(cfg, ranks=args.ranks)
    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    out = Path(args.output)
    if out.suffix.lower() not in (".tsv", ".parquet"):
        raise InputError(f"{out}: output must end in .tsv or .parquet")
    require_writable(out, "results")
    for r in args.runs:
        if not Path(r).is_file():
            raise InputError(f"{r}: spectrum file not found")
    if args.readers is not None and args.readers < 0:
        raise InputError("--readers must be 0 or more")
    if args.processes is not None and args.processes < 1:
        raise InputError("--processes must be 1 or more")
    # the reader first, its workers forked while this process has one thread and no CuPy (else they are spawned and
    # each imports NumPy, Arrow and rtsearch itself); it reads while the target opens; the inputs are hashed beside
    with SpectrumReader(args.runs, batch_size=args.batch_size, readers=args.readers) as reader, \
            InputHashes(args.runs) as hashes:  # fmt: skip
        log.debug("reading %d runs (%s worker processes, %s)", len(args.runs), reader.workers or "no",
                  "forked" if reader.forked else "spawned")
        start_driver(args.backend or cfg.search.backend)  # the CUDA driver's start beside CuPy's import, readers forked
        backend = backend_of(args, cfg)
        log.debug("backend %s ready", backend.name)
        target = open_target(args, cfg, backend)
        log.info("searching %s %s on %s (%s); search settings %s", target.kind,
                 args.index or args.library or args.proteoforms, backend.name, backend.device,
                 resolved_dict(cfg.topdown if args.proteoforms else cfg.search))  # fmt: skip
        with contextlib.ExitStack() as stack:
            scorers = engines(target, args.processes, stack)
            bar = Progress("search", unit="spectra")
            table, summary = search_runs(reader, target, batch_size=args.batch_size, scorers=scorers,
                                         progress=lambda done, total: bar.set(done, total))  # fmt: skip
            bar.close()
        if args.ms1:
            from rtsearch.search.ms1 import attach_ms1

            t0 = time.perf_counter()
            found = attach_ms1(table, args.runs, xp=backend.xp)
            summary = dataclasses.replace(summary, ms1_seconds=time.perf_counter() - t0)
            log.info("MS1 elution of %d identified precursors", found)
    log.debug("reading stopped, inputs hashed")
    rec = provenance.record(command=args.argv, config=resolved_dict(cfg), inputs=hashes.records(),
                            target=args.index or args.library or args.proteoforms)  # fmt: skip
    n = write_table(table, out, provenance=rec)
    log.debug("%s written (provenance: %s)", out, provenance.sidecar(out))
    print(f"{out}: {n:,} rows; {summary}")
    return 0


def engines(target: SearchTarget, processes: int | None, stack: contextlib.ExitStack) -> list[Scorer]:
    """Engine processes scoring ``target`` beside this one, started (``processes``; default one a CPU) and closed
    with ``stack`` (at once when the search fails: Ctrl-C), where its spectra take seconds each on the CPU
    (`SearchTarget.batch_limit`: top-down) and it can be opened again; else none: it scores here."""
    from rtsearch.serve.executors.engine_process import EngineProcess

    costly = target.batch_limit is not None and not target.backend.is_gpu
    if processes is not None and processes > 1 and not costly:
        raise InputError("--processes applies to a top-down search on the CPU (--proteoforms, --backend numpy)")
    n = processes or len(os.sched_getaffinity(0))
    reopen = target.reopen(target.backend.name)
    if not costly or n < 2 or reopen is None:
        return []
    started = [EngineProcess(reopen, f"engine-{k}") for k in range(n)]

    def close(failed: type[BaseException] | None, *_: Any) -> None:
        for e in started:
            e.close(0.0 if failed else 5.0)

    stack.push(close)
    with concurrent.futures.ThreadPoolExecutor(n) as pool:  # each opens the target: side by side
        list(pool.map(EngineProcess.start, started))
    log.debug("%d engine processes started", n)
    return [e.score for e in started]
