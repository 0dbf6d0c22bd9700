"""``rtsearch serve``: the real-time daemon over an index or a library, until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from rtsearch.cli.target import add_backend_argument, add_target_arguments, backend_of, target_choice
from rtsearch.config import (
    ClusterMode,
    EngineHost,
    LaneWorkers,
    PlacementKind,
    SpectraMode,
    choices,
    load_config,
)

log = logging.getLogger(__name__)


def add_parser(sub: Any) -> None:
    """The ``serve`` command, on the subparsers ``sub`` of the ``rtsearch`` parser."""
    d = sub.add_parser(
        "serve",
        help="run the real-time daemon",
        description="Subscribe to a ZeroMQ stream of spectra (wire protocol v1, docs/protocol.md), score them in "
        "micro-batches and publish one result per MS2 spectrum on ZeroMQ (and MQTT); write each run's results "
        "file at run.end. Flags override the [serve] table of --config. Stop with SIGINT or SIGTERM.",
    )
    add_target_arguments(d, rows="results")
    d.add_argument("--config", metavar="TOML", help="[search], [library] and [serve] settings")
    d.add_argument("--spectra", metavar="ENDPOINT", help="spectra endpoint (default tcp://127.0.0.1:5555)")
    d.add_argument("--spectra-mode", choices=choices(SpectraMode),
                   help="sub: connect to the instrument's PUB (default); pull: bind, for lossless PUSH feeds")
    d.add_argument("--results", metavar="ENDPOINT", help="results PUB, bound (default tcp://127.0.0.1:5556)")
    d.add_argument("--metrics-port", type=int, metavar="PORT", help="Prometheus /metrics port (default 9108; 0: any)")
    d.add_argument("--mqtt", metavar="HOST:PORT", help="publish identifications and run summaries to this broker")
    d.add_argument("--instrument", metavar="NAME", help="instrument name in MQTT topics (default 'instrument')")
    d.add_argument("--budget-ms", type=float, metavar="MS", help="default per-spectrum latency budget (default 100)")
    add_backend_argument(d)
    d.add_argument("--results-dir", metavar="DIR", help="folder for each run's results file (default rtsearch-results)")
    d.add_argument("--workers", type=int, metavar="N",
                   help="engine worker threads, each with its own CUDA stream or engine process (default 1); "
                   "those after the first take only large batches: 6 for bulk replays, with --max-batch 4096 and "
                   "--publishers 2 (the target 6 times on the GPU)")
    d.add_argument("--engine", choices=choices(EngineHost),
                   help="where each worker scores: process (its own, the target opened again there: no GIL shared "
                   "with the daemon), thread (the daemon's process), auto (default: a process on a GPU)")
    d.add_argument("--max-batch", type=int, metavar="N", help="spectra per micro-batch at most (default 4096)")
    d.add_argument("--intakes", type=int, metavar="N",
                   help="processes decoding spectra, behind a proxy on the spectra socket when 2 or more "
                   "(default 0: one per 4 cores, at most 4)")
    d.add_argument("--publishers", type=int, metavar="N",
                   help="processes encoding and sending results (default 0: the engine thread does)")
    d.add_argument("--cluster", type=int, metavar="N",
                   help="score on N workers of their own (processes here, or Ray actors with --placement ray), "
                   "each opening the target on --backend; this daemon is their front door and keeps the target on "
                   "the host (default 0: score here)")
    d.add_argument("--cluster-mode", choices=choices(ClusterMode),
                   help="replicate: each worker holds the whole target, whole batches go to the least busy; "
                   "partition: each worker holds a slice of the precursor-mass range cut by equal work (Li et al.) "
                   "and scores the queries in its piece; auto (default): replicate when the target fits a worker's "
                   "memory ([serve] worker_memory_gb, else its share of its GPU), else partition")
    d.add_argument("--placement", choices=choices(PlacementKind),
                   help="who starts and restarts the workers: local processes, or Ray actors (default local)")
    d.add_argument("--ray-address", metavar="ADDR", help="Ray cluster to join (default: start one on this host)")
    d.add_argument("--elution", action="store_true", default=None,
                   help="follow each identified precursor through the MS1 scans and publish its elution's apex and "
                   "end (topic 'elution' on the results socket, <base>/<run>/elution on MQTT)")
    d.add_argument("--lanes", type=int, metavar="N",
                   help="spread the runs over N daemon processes behind this one (each opens the target, scores on "
                   "its own engine, lane k on GPU k mod the host's GPUs, and owns the runs it is given; for many "
                   "runs at once: one run stays on one lane); default 1")
    d.add_argument("--lane-workers", choices=choices(LaneWorkers),
                   help="with --lanes and --cluster: shared (the lanes send to one cluster of N workers, each piece "
                   "of a partition held once, each worker batching what every lane sends it; local placement), "
                   "own (each lane a cluster of N workers of its own), or auto (default: own while the target fits "
                   "each of the lanes' workers whole, else shared)")


def run(args: argparse.Namespace) -> int:
    """``rtsearch serve``: the configuration with the command line's settings applied, served
    (`rtsearch.serve.service`)."""
    import dataclasses

    from rtsearch.config import validate_serve
    from rtsearch.serve.service import Service, serve

    cfg = load_config(args.config)
    flags = {
        "spectra": args.spectra, "spectra_mode": args.spectra_mode, "results": args.results,
        "metrics_port": args.metrics_port, "mqtt": args.mqtt, "instrument": args.instrument,
        "budget_ms": args.budget_ms, "results_dir": args.results_dir, "workers": args.workers,
        "max_batch": args.max_batch, "intakes": args.intakes, "publishers": args.publishers, "engine": args.engine,
        "elution": args.elution, "cluster": args.cluster, "cluster_mode": args.cluster_mode,
        "cluster_placement": args.placement, "ray_address": args.ray_address, "lanes": args.lanes,
        "lane_workers": args.lane_workers,
    }  # fmt: skip
    settings = dataclasses.replace(cfg.serve, **{k: v for k, v in flags.items() if v is not None})
    if settings.max_queue < settings.max_batch:
        settings = dataclasses.replace(settings, max_queue=8 * settings.max_batch)
    validate_serve(settings)
    cfg = dataclasses.replace(cfg, serve=settings)
    return serve(Service(cfg, target_choice(args, cfg), backend_of(args, cfg).name, args.argv,
                         logging.DEBUG if args.verbose else logging.INFO, args.log_format))  # fmt: skip
