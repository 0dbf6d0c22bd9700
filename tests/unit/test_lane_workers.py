"""Whether lanes with a cluster share its workers, and in which mode (`rtsearch.cluster.serve.plan`): each lane its
own workers while the target fits them whole; shared (each piece held once, or the target whole on a worker of the
larger share) when it does not; never where the lanes cannot share (Ray placement, one lane)."""

from __future__ import annotations

import dataclasses

import pytest

from rtsearch.cluster.serve import may_share, plan
from rtsearch.config import ServeConfig

GB = 1e9
LANES = ServeConfig(lanes=2, cluster=2)  # two lanes of two workers on, say, two GPUs: own room 1 GB, shared 2 GB


@pytest.mark.parametrize(("size", "lane_workers", "mode", "want"), [
    (0.8 * GB, "auto", "auto", ("replicate", False, 1 * GB)),  # fits each lane's own workers: as before
    (1.5 * GB, "auto", "auto", ("replicate", True, 2 * GB)),  # too large for own, whole on a shared worker
    (3.0 * GB, "auto", "auto", ("partition", True, 2 * GB)),  # too large for any worker: pieces, each held once
    (0.5 * GB, "auto", "partition", ("partition", True, 2 * GB)),  # a partition asked for: its pieces held once
    (3.0 * GB, "own", "auto", ("partition", False, 1 * GB)),  # own asked for: each lane its own pieces
    (0.5 * GB, "shared", "auto", ("replicate", True, 2 * GB)),
])  # fmt: skip
def test_lanes_share_their_workers_when_the_target_does_not_fit_their_own(size, lane_workers, mode, want) -> None:
    cfg = dataclasses.replace(LANES, lane_workers=lane_workers, cluster_mode=mode)
    assert plan(cfg, size, 1 * GB, 2 * GB) == want


def test_lanes_that_cannot_share_keep_their_own_workers() -> None:
    assert plan(dataclasses.replace(LANES, lane_workers="shared"), 3.0 * GB, 1 * GB, None) == ("partition", False, GB)
    assert may_share(LANES) and may_share(dataclasses.replace(LANES, lane_workers="shared"))
    for cfg in (dataclasses.replace(LANES, lane_workers="own"), dataclasses.replace(LANES, cluster_placement="ray"),
                dataclasses.replace(LANES, lanes=1), dataclasses.replace(LANES, cluster=0)):  # fmt: skip
        assert not may_share(cfg), cfg
