"""The daemon's cluster, from its ``[serve]`` settings: the mode, each worker's share, placement, the started
`ClusterScorer`.

``cluster_mode = "auto"`` replicates a target that fits one worker's memory (``worker_memory_gb``, else its
share of its GPU: `TARGET_SHARE` of the device's memory over the workers placed on it) and partitions one that
does not; a partition worker holds its piece of the mass range widened to what its memory allows
(`rtsearch.cluster.partition.serving_ranges`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np

from rtsearch.cluster.door import ClusterScorer
from rtsearch.cluster.partition import LiveCuts, balance, bin_work, piece_work, serving_ranges
from rtsearch.cluster.pieces import Pieces
from rtsearch.cluster.placement import LocalPlacement, Placement, RayPlacement
from rtsearch.cluster.share import Share
from rtsearch.config import BackendName, ClusterMode, ServeConfig
from rtsearch.errors import ConfigError
from rtsearch.search.target import SearchTarget
from rtsearch.serve.children.runtime import host_gpus

log = logging.getLogger(__name__)

__all__ = ["ClusterScorer", "may_share", "open_cluster", "partition_cuts", "plan", "target_bytes"]

TARGET_SHARE = 0.6  # of a worker's share of its GPU, for the target (the rest: batches, CuPy's pool, the context)


def partition_cuts(target: SearchTarget, pieces: int) -> LiveCuts:
    """Li et al.'s equal-work cuts of ``target``'s precursor masses (its candidates per Da) into ``pieces``, made
    again as the spectra come (`LiveCuts`)."""
    masses = _masses(target)
    work, start = bin_work(masses)
    live = LiveCuts(work, start, pieces)
    log.info("cluster: %d pieces cut at %s Da; work max/mean %.3f", pieces, np.round(live.cuts, 1).tolist(),
             balance(piece_work(work, start, live.cuts)))  # fmt: skip
    return live


def open_cluster(target: SearchTarget, cfg: ServeConfig, backend: BackendName,
                 record: Callable[..., None] = lambda _: None, share: Share | None = None
                 ) -> ClusterScorer:  # fmt: skip
    """``cfg.cluster`` workers placed and up (each opened the target, or its slice, on ``backend`` and warmed up),
    their front door's scorer returned; the caller closes it (``__exit__``). ``share``: this daemon is a lane of
    lanes that may share the workers (`rtsearch.cluster.share`; lane 0's door starts them; `plan` decides)."""
    reopen = target.reopen(backend)
    if reopen is None:
        raise ConfigError("--cluster needs a target opened from its folder (--index, --library or --proteoforms)")
    shared = worker_memory(cfg, backend, shared=True) if share is not None else None
    mode, sharing, room = plan(cfg, target_bytes(target), worker_memory(cfg, backend), shared)
    share = share if sharing else None
    pieces = None
    log.info("cluster: the target (%.2f GB) %s a worker's %.2f GB: %s%s", target_bytes(target) / 1e9,
             "fits" if target_bytes(target) <= room else "does not fit", room / 1e9, mode,
             ", the lanes sharing the workers" if share else "")  # fmt: skip
    if mode == "partition":
        if cfg.cluster % cfg.piece_workers:
            raise ConfigError(f"[serve] cluster ({cfg.cluster}) must be a multiple of piece_workers "
                              f"({cfg.piece_workers}): each piece is held by piece_workers workers")  # fmt: skip
        pieces = _pieces(target, cfg.cluster // cfg.piece_workers, room, backend)
    elif target_bytes(target) > room:
        raise ConfigError(f"the target needs {target_bytes(target) / 1e9:.2f} GB, a cluster worker has "
                          f"{room / 1e9:.2f} GB: cluster_mode = \"partition\" (or \"auto\")")  # fmt: skip
    placement: Placement
    if cfg.cluster_placement == "ray":
        placement = RayPlacement(address=cfg.ray_address, gpus_per_worker=cfg.gpus_per_worker)
    else:
        placement = LocalPlacement(gpus=host_gpus() if cfg.gpus_per_worker > 0 else 0)
    return ClusterScorer(reopen, placement, workers=cfg.cluster, pieces=pieces, host=cfg.cluster_host,
                         timeout_s=cfg.budget_ms / 1e3, record=record, share=share,
                         curve=cfg.cluster_curve).__enter__()  # fmt: skip


def may_share(cfg: ServeConfig) -> bool:
    """Whether the lanes of ``cfg`` may share one cluster's workers (``lane_workers`` not "own", local placement):
    the lanes' front then gives each lane its door's endpoints (`rtsearch.cluster.share`); `plan` decides."""
    return cfg.lanes > 1 and cfg.cluster > 0 and cfg.lane_workers != "own" and cfg.cluster_placement == "local"


def plan(cfg: ServeConfig, size: float, own: float, shared: float | None) -> tuple[ClusterMode, bool, float]:
    """The cluster's mode, whether the lanes share its workers, and a worker's room (bytes), for a target of
    ``size`` bytes: ``own``, a worker's room when each lane has its own; ``shared``, when they share them (None:
    they cannot). ``lane_workers = "auto"``: each lane its own workers while the target fits them whole (replicate,
    as fast, and no lane waits for another's batches), else shared — replicated if the target fits a worker of the
    larger share, else partitioned, each piece held once."""
    sharing = shared is not None and cfg.lane_workers != "own"
    if sharing and cfg.lane_workers == "auto":
        sharing = cfg.cluster_mode == "partition" or size > own
    room = shared if sharing and shared is not None else own
    mode = cfg.cluster_mode
    if mode == "auto":
        mode = "replicate" if size <= room else "partition"
    return mode, sharing, room


def worker_memory(cfg: ServeConfig, backend: BackendName, *, shared: bool = False) -> float:
    """Bytes of the target a worker may hold: ``worker_memory_gb``, else `TARGET_SHARE` of its share of its GPU
    (CPU workers: no limit; the target is memory-mapped) — local workers: the ``lanes`` × ``cluster`` workers of the
    lanes' clusters (``cluster`` when the lanes share them: ``shared``) spread evenly over the host's GPUs
    (`rtsearch.serve.lanes.lane_device`)."""
    if cfg.worker_memory_gb > 0:
        return cfg.worker_memory_gb * 1e9
    if backend != "cupy":
        return math.inf
    per_gpu, gpus = _gpu_memory(), max(host_gpus(), 1)
    share = min(cfg.gpus_per_worker, 1.0) if cfg.cluster_placement == "ray" and cfg.gpus_per_worker > 0 else \
        1.0 / math.ceil((1 if shared else cfg.lanes) * cfg.cluster / gpus)  # fmt: skip
    return TARGET_SHARE * per_gpu * share


def _pieces(target: SearchTarget, workers: int, room: float, backend: BackendName) -> Pieces:
    """``workers`` pieces and their slices of ``target``, ``room`` bytes each at most."""
    cuts = partition_cuts(target, workers)
    per_peptide, shared = target.slice_sizes()  # type: ignore[attr-defined]  # an index: `partition_cuts` checked
    size, start = bin_work(_masses(target), weights=per_peptide)
    try:
        serves = serving_ranges(size, start, cuts.cuts, room - shared, pad_da=_window_da(target))
    except ValueError as e:
        raise ConfigError(f"cluster: the target ({target_bytes(target) / 1e9:.2f} GB) does not fit {workers} workers "
                          f"of {room / 1e9:.2f} GB ({e}): more workers, or more memory each") from None  # fmt: skip
    log.info("cluster: each worker holds precursor masses %s Da", [(round(a, 1), round(b, 1)) for a, b in serves])
    whole = target.reopen(backend)
    assert whole is not None  # `open_cluster` checked
    reopens = [target.reopen_slice(own, backend) if np.isfinite(own).any() else whole  # type: ignore[attr-defined]
               for own in serves]  # fmt: skip
    return Pieces(target, cuts, serves, reopens)


def _window_da(target: SearchTarget) -> float:
    """The widest a query's precursor window reaches beyond its mass (Da), at the heaviest peptide: what
    `DatabaseTarget.reopen_slice` adds to a slice on either side."""
    heaviest = float(np.nanmax(_masses(target), initial=0.0))
    return max(target.reach_da(heaviest))  # type: ignore[attr-defined]  # an index: `partition_cuts` checked


def _masses(target: SearchTarget) -> np.ndarray:
    masses = getattr(getattr(target, "index", None), "mass", None)
    if masses is None:
        raise ConfigError(f"cluster_mode = \"partition\" cuts a peptide index by mass; {target.kind} targets: use "
                          "\"replicate\"")  # fmt: skip
    return np.asarray(masses)


def target_bytes(target: SearchTarget) -> int:
    """Bytes a device holds of ``target`` (0 for kinds not cut by mass: those are replicated)."""
    sizes = getattr(target, "slice_sizes", None)
    if sizes is None:
        return 0
    per_peptide, shared = sizes()
    return int(per_peptide.sum()) + shared


def _gpu_memory() -> float:
    """Bytes of memory of this host's first GPU (its workers' devices are alike)."""
    import cupy

    return float(cupy.cuda.runtime.getDeviceProperties(0)["totalGlobalMem"])
