"""What a cluster's door tells of its workers (shell): one `Cluster` stat per change, recorded through the
callback the daemon hands it (`rtsearch.serve.observe.stats` counts it among its stats; the metrics export it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Cluster:
    """A cluster worker (`rtsearch.cluster.door`) of process ``pid`` (0: none yet): up or not, its piece (-1:
    replicate), spectra it answered and the seconds it spent scoring them (``busy_s``) in ``rounds`` (a batch's
    part of the round its worker scored it in: the batches waiting there scored as one); ``died``: it was called
    dead (silent, or back as a new process) and its batches ``resent``."""

    worker: str
    piece: int
    up: bool
    spectra: int = 0
    busy_s: float = 0.0
    rounds: float = 0.0
    pid: int = 0
    died: bool = False
    resent: int = 0
