"""Lanes sharing one cluster's workers (``[serve] lane_workers``: "shared", or "auto" when the target does not fit
each lane's own workers whole: `rtsearch.cluster.serve.plan`; `rtsearch.serve.lanes`).

With ``--lanes K --cluster N`` each lane is a daemon process with a front door of its own (`ClusterScorer`); shared,
the K doors send to the same N workers instead of K × N: a partition's piece is held once (not once a lane), and a
worker scores what every lane sent it in one batch (`rtsearch.cluster.worker`) — the lanes' halves of their batches
become one batch a piece, as large as one lane's whole batch, on one process a GPU::

    lane 0: door (ROUTER, PULL at ipc://…/cluster-0-*) ──┐   ┌── worker w0 (piece 0, GPU 0): a DEALER and a PUSH
    lane 1: door (ROUTER, PULL at ipc://…/cluster-1-*) ──┼───┤   to every lane's door; says hello to each
    …                                                    ┘   └── worker w1 (piece 1, GPU 1)

The doors bind where the lanes' front said (`Share.door`, in its folder: the front knows them before any lane
starts); lane 0's door starts the workers with every door's endpoints, and its placement restarts one that dies
(it says hello to every door again, and each sends it what it held again). A worker stops when every door said
stop. Local placement only (the endpoints are this host's); Ray's workers stay a lane's own.

The folder is the endpoints' lock: ``ipc://`` sockets are files, and only the daemon's user may enter the folder
(mode 0700, `tempfile.mkdtemp`'s; `Share.check` refuses any other before a door binds there). So no CURVE on these
doors (`rtsearch.cluster.auth`): a peer that can reach them is the daemon's own user.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from rtsearch.errors import EndpointError

Endpoints = tuple[str, str]  # a front door's ROUTER (batches) and PULL (heartbeats)


@dataclass(frozen=True)
class Share:
    """Lane ``index`` of ``lanes`` sharing the workers; the doors' endpoints are in ``folder``."""

    folder: str
    index: int
    lanes: int

    def check(self) -> None:
        """Raise `EndpointError` unless the folder is this user's own, closed to every other (0700)."""
        try:
            st = os.stat(self.folder)
        except OSError as e:
            raise EndpointError(f"the lanes' cluster folder {self.folder}: {e.strerror}") from None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
            raise EndpointError(f"the lanes' cluster folder {self.folder} must be a folder of this user's that no "
                                f"other may enter (mode 0700, not {stat.S_IMODE(st.st_mode):o})")  # fmt: skip

    def door(self, lane: int) -> Endpoints:
        """Lane ``lane``'s door's endpoints."""
        return f"ipc://{self.folder}/cluster-{lane}-router", f"ipc://{self.folder}/cluster-{lane}-beats"

    @property
    def doors(self) -> tuple[Endpoints, ...]:
        """Every lane's, in lane order: lane 0's, the keeper's, first (a worker's first door started it)."""
        return tuple(self.door(k) for k in range(self.lanes))

    @property
    def keeper(self) -> bool:
        """Whether this lane starts (and restarts) the workers."""
        return self.index == 0
