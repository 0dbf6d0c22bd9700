"""A `bench/cluster_bench.py` ``--configs`` label as ``rtsearch serve`` arguments and the configuration file they
name: ``N:MODE[:ROOM]`` (one daemon, N cluster workers) or ``K:lanes:G[:C[:MODE[:ROOM]]][:shared|:own][:xP]``
(lanes; see `_lanes_args`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def serve_args(c: str, tmp: Path, args: argparse.Namespace, one: list[str], target_gb: float) -> list[str]:
    """Label ``c``'s serve arguments (``one``: those of the lone engine, which lanes without a cluster keep;
    ``target_gb``: the target's size on a device, for ``ROOM`` given as a fraction)."""
    if c.split(":")[1] == "lanes":
        return _lanes_args(c, tmp, args, one, target_gb)
    n, mode, *rest = c.split(":")
    toml = config_file(tmp, c, args.search_toml, args.gpus_per_worker, room_gb((rest or ["0"])[0], target_gb),
                       args.serve_toml)
    return ["--cluster", n, "--cluster-mode", mode, "--placement", args.placement, "--config", str(toml)]


def room_gb(text: str, target_gb: float) -> float:
    """``worker_memory_gb`` of a ``--configs`` entry: GB, or ``0.6x``: that fraction of the target."""
    return float(text[:-1]) * target_gb if text.endswith("x") else float(text)


def _lanes_args(c: str, tmp: Path, args: argparse.Namespace, one: list[str], target_gb: float) -> list[str]:
    """``K:lanes:G[:C[:MODE[:ROOM]]][:shared|:own][:xP]``'s serve arguments: ``--lanes K``, with ``--cluster C``
    (its workers on GPUs, one each, where ``--gpus-per-worker`` says so) in ``MODE`` (default: the daemon's, auto),
    each worker with room for ``ROOM`` of the target (GB, or ``0.6x``: that fraction; default: its share of its GPU);
    ``shared``: the lanes send to one cluster of C workers (``--lane-workers``; default: the daemon's); ``xP``:
    partition, P workers a piece (``[serve] piece_workers``: C / P pieces)."""
    k, _, _, *rest = c.split(":")
    per_piece = rest.pop()[1:] if rest and rest[-1][:1] == "x" else "1"
    share = rest.pop() if rest and rest[-1] in ("shared", "own") else ""
    if not rest:
        return ["--lanes", k, *one]
    room = room_gb(rest[2], target_gb) if len(rest) > 2 else 0.0
    toml = config_file(tmp, c, args.search_toml, args.gpus_per_worker, room,
                       serve=f"{args.serve_toml}\npiece_workers = {per_piece}")
    return ["--lanes", k, "--cluster", rest[0], *(["--cluster-mode", rest[1]] if len(rest) > 1 else []),
            *(["--lane-workers", share] if share else []), "--placement", args.placement,
            "--config", str(toml)]  # fmt: skip


def config_file(tmp: Path, label: str, search: str, gpus: float = 0.0, memory_gb: float = 0.0, serve: str = "") -> Path:
    """A configuration file: ``search`` as its [search] section; [serve] with the workers' GPUs and memory and
    ``serve``'s lines."""
    path = tmp / f"config-{label.replace(':', '-')}.toml"
    path.write_text((f"[search]\n{search}\n" if search else "")
                    + f"[serve]\ngpus_per_worker = {gpus}\nworker_memory_gb = {memory_gb}\n{serve}\n")  # fmt: skip
    return path
