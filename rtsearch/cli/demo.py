"""``rtsearch demo``: daemon and simulator in one process on the bundled E. coli run.

The bundled database and run (see ``rtsearch/data/NOTICE.md``) are indexed
once into a cache folder; the daemon binds free loopback ports (PULL for
spectra, PUB for results, metrics on any free port); the simulator replays
the run in a thread and a collector prints identifications as they arrive;
the summary combines the run's final FDR with the collector's latencies.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtsearch import __version__
from rtsearch.cli.target import add_backend_argument, backend_of
from rtsearch.config import ServeConfig, load_config
from rtsearch.errors import RtsearchError

if TYPE_CHECKING:  # the command line imports every command: the demo's heavy imports wait for the demo
    from rtsearch.database.index import PeptideIndex

log = logging.getLogger(__name__)

FASTA, RUN, TOML = "ecoli.fasta", "Ecoli_MS2_small.mzML", "ecoli.toml"
# the bundled run's 139 spectra hold ~90 matches: under q = (decoys + 1) / targets a list at 1 % needs 100 targets
# ranked above the first decoy, so the demo answers identified at a running q of 5 % ([serve] identified_at)
DEMO_IDENTIFIED_AT = 0.05


def bundled(name: str) -> Path:
    """Path of a bundled data file."""
    return Path(str(resources.files("rtsearch") / "data" / name))


def cached_index(cache: Path) -> tuple[PeptideIndex, bool]:
    """The demo index from ``cache``, built there first if missing or stale; ``(index, built)``."""
    from rtsearch.database.build import build_index
    from rtsearch.database.store import file_record, load_index, save_index

    cfg = load_config(bundled(TOML))
    key = hashlib.sha256(bundled(FASTA).read_bytes() + bundled(TOML).read_bytes() + __version__.encode())
    folder = cache / f"demo-ecoli-{key.hexdigest()[:12]}"
    if folder.is_dir():
        try:
            return load_index(folder, expect=cfg.database), False
        except RtsearchError as e:
            log.info("cached demo index unusable (%s): rebuilding", e)
    fasta = bundled(FASTA)
    index = build_index([fasta], cfg.database, input_hashes=[file_record(fasta)])
    save_index(index, folder)
    return load_index(folder), True


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rtsearch"


def add_parser(sub: Any) -> None:
    """The ``demo`` command, on the subparsers ``sub`` of the ``rtsearch`` parser."""
    e = sub.add_parser(
        "demo",
        help="the embedded default: daemon + simulator on the bundled E. coli run",
        description="Build (or load from the cache) the index of the bundled E. coli database, start the daemon "
        "and the simulator in this process on free loopback ports, replay the bundled real run and print "
        "identifications as they arrive, then a summary. Needs no GPU and no broker.",
    )
    e.add_argument("--rate", type=float, default=200.0, metavar="HZ", help="spectra per second sent (default 200)")
    e.add_argument("--budget-ms", type=float, default=1000.0, metavar="MS",
                   help="each spectrum's latency budget (default 1000: a replay on a busy laptop answers every "
                   "spectrum scored; `rtsearch serve` defaults to 100, and sheds what would be later)")
    e.add_argument("--out", default="demo-out", metavar="DIR", help="folder for the results file (default demo-out)")
    e.add_argument("--cache", metavar="DIR", help="index cache folder (default ~/.cache/rtsearch)")
    add_backend_argument(e)
    e.add_argument("--mqtt", metavar="HOST:PORT", help="also publish to this MQTT broker")
    e.add_argument("--quiet", action="store_true", help="print only the summary")


def run(args: argparse.Namespace) -> int:
    from rtsearch.search.database import DatabaseTarget
    from rtsearch.search.fdr import RULE
    from rtsearch.serve.daemon import Daemon, Finished
    from rtsearch.types import ResultStatus
    from rtsearch_sim.collector import Collector
    from rtsearch_sim.replay import Sender, Sent, load_run, replay

    cfg = load_config(bundled(TOML))
    backend = backend_of(args, cfg)
    if backend.is_gpu:
        print(f"GPU: {backend.device} (CuPy)")
    else:
        print("no GPU: scoring with NumPy on the CPU")
    print("MQTT: " + (f"publishing to {args.mqtt}" if args.mqtt else
                      "no broker given, results go to ZeroMQ and the results file (--mqtt HOST:PORT to add one)"))
    cache = Path(args.cache) if args.cache else default_cache()
    index, built = cached_index(cache)
    print(f"index: {len(index.mass):,} peptides (targets and decoys) of the bundled E. coli database, "
          f"{'built into' if built else 'loaded from'} {cache}")  # fmt: skip
    serve = ServeConfig(
        spectra="tcp://127.0.0.1:*", spectra_mode="pull", results="tcp://127.0.0.1:*", metrics_port=0,
        mqtt=args.mqtt or "", instrument="demo", results_dir=args.out, budget_ms=args.budget_ms,
        identified_at=DEMO_IDENTIFIED_AT,
    )  # fmt: skip
    spectra = load_run(bundled(RUN))
    finished: list[Finished] = []
    sent = Sent()
    collector_box: dict[str, Any] = {}
    errors: list[BaseException] = []

    def show(res: dict[str, Any]) -> None:
        if res.get("status") == "identified" and not args.quiet:
            print(f"  scan {res['scan']:>6}  {res['peptide']:<40} z={res['charge']}  score {res['score']:6.2f}  "
                  f"q {res['q_value']:.4f}  {(res['published_ns'] - res['sent_ns']) / 1e6:6.2f} ms", flush=True)

    import asyncio

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        daemon = Daemon(DatabaseTarget(index, cfg.search, backend), serve, on_run_finished=finished.append)
        task = asyncio.create_task(daemon.run(stop))
        ready = asyncio.create_task(daemon.ready.wait())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
            return
        print(f"daemon: spectra {daemon.endpoints.spectra}, results {daemon.endpoints.results}, "
              f"metrics http://127.0.0.1:{daemon.endpoints.metrics_port}/metrics")  # fmt: skip

        def simulate() -> None:
            try:
                col = Collector(daemon.endpoints.results)
                col.on_message = show
                collector_box["c"] = col.start()
                with Sender(daemon.endpoints.spectra, mode="push", wait_s=10) as sender:
                    replay(sender, [(spectra[0].run, spectra)], speed=None, rate=args.rate, sent=sent)
                col.wait(len(sent.ms2), idle_s=30, timeout_s=300)
            except BaseException as e:  # reported by the main thread
                errors.append(e)
            finally:
                loop.call_soon_threadsafe(stop.set)

        print(f"replaying {len(spectra)} spectra of {spectra[0].run} at {args.rate:g} spectra/s ...")
        await asyncio.gather(asyncio.to_thread(simulate), task)

    asyncio.run(main())
    col = collector_box.get("c")
    if col is not None:
        col.stop()
    if errors:
        raise errors[0]
    if col is None or not finished:
        print("demo: the daemon stopped before the run finished")
        return 1
    report = col.report(sent.ms2, first_ns=sent.first_ns)
    s = finished[0].summary
    lat = report.latency_ms
    shed = s.by_status.get(ResultStatus.SHED.value, 0)
    print(f"\n{s.spectra} MS2 spectra answered of {report.sent} sent ({report.lost} lost, {shed} shed over their "
          f"{args.budget_ms:g} ms budget); "
          f"{s.identified_running} identified live (running q <= {serve.identified_at:g}); "
          f"{s.psms_at_1pct} PSMs and {s.peptides_at_1pct} peptides at 1% FDR after the run, {s.psms_at_5pct} PSMs at "
          f"5% (q = {RULE}: a list at 1% holds 100 targets or more)")
    print(f"latency sent -> result: p50 {lat.get('p50', float('nan')):.2f} ms, p99 {lat.get('p99', float('nan')):.2f} "
          f"ms, max {lat.get('max', float('nan')):.2f} ms; results file {finished[0].path}")  # fmt: skip
    return 0 if report.lost == 0 else 1
