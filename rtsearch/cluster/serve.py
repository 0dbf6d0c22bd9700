"""The daemon's cluster, from its ``[serve]`` settings: placement, partition and the started `ClusterScorer`."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from rtsearch.cluster.door import ClusterScorer
from rtsearch.cluster.partition import LiveCuts, balance, bin_work, piece_work
from rtsearch.cluster.placement import LocalPlacement, Placement, RayPlacement
from rtsearch.config import ServeConfig
from rtsearch.errors import ConfigError
from rtsearch.search.target import SearchTarget

log = logging.getLogger(__name__)

__all__ = ["ClusterScorer", "open_cluster", "partition_cuts"]


def partition_cuts(target: SearchTarget, pieces: int) -> LiveCuts:
    """Li et al.'s equal-work cuts of ``target``'s precursor masses (its candidates per Da) into ``pieces``, made
    again as the spectra come (`LiveCuts`)."""
    index = getattr(target, "index", None)
    masses = getattr(index, "mass", None)
    if masses is None:
        raise ConfigError(f"cluster_mode = \"partition\" cuts a peptide index by mass; {target.kind} targets: use "
                          "\"replicate\"")  # fmt: skip
    work, start = bin_work(np.asarray(masses))
    live = LiveCuts(work, start, pieces)
    log.info("cluster: %d pieces cut at %s Da; work max/mean %.3f", pieces, np.round(live.cuts, 1).tolist(),
             balance(piece_work(work, start, live.cuts)))  # fmt: skip
    return live


def open_cluster(target: SearchTarget, cfg: ServeConfig, record: Callable[..., None] = lambda _: None) -> ClusterScorer:
    """``cfg.cluster`` workers placed and up (each opened the target again and warmed up), their front door's
    scorer returned; the caller closes it (``__exit__``)."""
    reopen = target.reopen(target.backend.name)
    if reopen is None:
        raise ConfigError("--cluster needs a target opened from its folder (--index, --library or --proteoforms)")
    cuts = partition_cuts(target, cfg.cluster) if cfg.cluster_mode == "partition" else None
    placement: Placement
    if cfg.cluster_placement == "ray":
        placement = RayPlacement(address=cfg.ray_address, gpus_per_worker=cfg.gpus_per_worker)
    else:
        placement = LocalPlacement(gpus=_gpus() if cfg.gpus_per_worker > 0 else 0)
    return ClusterScorer(reopen, placement, workers=cfg.cluster, mode=cfg.cluster_mode, cuts=cuts,
                         host=cfg.cluster_host, timeout_s=cfg.budget_ms / 1e3, record=record).__enter__()


def _gpus() -> int:
    """CUDA devices of this host (0 when CuPy or a GPU is missing)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy, no driver, no device
        return 0
