"""What ``search`` and ``serve`` search (``--index``, ``--library [--open]`` or ``--proteoforms``) and where they
compute.

`add_target_arguments` adds the choice to a command's parser; `open_target` opens the
chosen `SearchTarget` on the backend `backend_of` resolves (``--backend``, else the
configuration's ``[search] backend``).
"""

from __future__ import annotations

import argparse
import logging

from rtsearch.config import BackendChoice, Config, choices
from rtsearch.errors import InputError
from rtsearch.scoring.backend import Backend, get_backend
from rtsearch.search.choice import TargetChoice
from rtsearch.search.target import SearchTarget

log = logging.getLogger(__name__)


def add_backend_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=choices(BackendChoice),
                   help="compute backend (default: [search] backend of --config, else auto)")  # fmt: skip


def add_target_arguments(p: argparse.ArgumentParser, *, rows: str) -> None:
    """``--index DIR`` or ``--library DIR``, ``--open``; ``rows`` names what a library adds (help text)."""
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--index", metavar="DIR", help="index built by 'rtsearch index build'")
    target.add_argument("--proteoforms", metavar="DIR",
                        help="top-down proteoform database built by 'rtsearch proteoforms build' (spectra: msalign, or "
                        "deconvoluted charge-1 spectra; settings: [topdown] of --config)")  # fmt: skip
    target.add_argument("--library", metavar="DIR",
                        help=f"spectral library imported by 'rtsearch library import' ({rows} gain library_id, dot, "
                        "dot_bias, delta_dot, f_value)")  # fmt: skip
    p.add_argument("--open", action="store_true",
                   help="with --library: open-modification search, every entry within [library] open_window_da "
                   "(default 500) Da of the precursor mass (precursor_mz - calc_mz, times the charge, is then the "
                   "modification's mass)")  # fmt: skip


def backend_of(args: argparse.Namespace, cfg: Config) -> Backend:
    """The backend ``--backend`` names, else the configuration's."""
    return get_backend(args.backend or cfg.search.backend)


def target_choice(args: argparse.Namespace, cfg: Config) -> TargetChoice:
    """What the arguments name (``--index``, ``--library [--open]`` or ``--proteoforms``)."""
    if args.library:
        return TargetChoice("library", args.library, cfg, open_search=bool(args.open))
    if args.open:
        raise InputError("--open applies to library search (--library)")
    if getattr(args, "proteoforms", None):
        return TargetChoice("proteoforms", args.proteoforms, cfg)
    return TargetChoice("index", args.index, cfg)


def open_target(args: argparse.Namespace, cfg: Config, backend: Backend) -> SearchTarget:
    """The index or library the arguments name, loaded (memory-mapped, then onto the device)."""
    return target_choice(args, cfg).open(backend)
