"""``rtsearch serve``: the real-time daemon over an index or a library, until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from rtsearch.cli.flags import add_flags, overridden
from rtsearch.cli.target import add_backend_argument, add_target_arguments, backend_of, target_choice
from rtsearch.config import ServeConfig, load_config

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
    add_backend_argument(d)
    add_flags(d, ServeConfig)  # the [serve] keys with an option, in their order, with their own words and defaults


def run(args: argparse.Namespace) -> int:
    """``rtsearch serve``: the configuration with the command line's settings applied, served
    (`rtsearch.serve.service`)."""
    import dataclasses

    from rtsearch.config import validate_serve
    from rtsearch.serve.service import Service, serve

    cfg = load_config(args.config)
    settings = overridden(args, cfg.serve)
    if settings.max_queue < settings.max_batch:
        settings = dataclasses.replace(settings, max_queue=8 * settings.max_batch)
    validate_serve(settings)
    cfg = dataclasses.replace(cfg, serve=settings)
    return serve(Service(cfg, target_choice(args, cfg), backend_of(args, cfg).name, args.argv,
                         logging.DEBUG if args.verbose else logging.INFO, args.log_format))  # fmt: skip
