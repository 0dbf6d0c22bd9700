"""The refit process's shutdown (`rtsearch.serve.runs.refits.Refitter.shutdown`) inside a daemon that is a process of
its own, as a lane is: the process ends at once when its refit process has nothing left, and within the bound when
it has a task still running (that task finished, or its process killed past ``timeout_s``)."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from rtsearch.serve.runs.refits import Refitter


def _lane(task_s: float, timeout_s: float) -> None:
    """A lane's life in short: a refit process started, a task handed to it, shutdown while it runs, main returns."""
    refitter = Refitter()
    refitter.start().result()
    refitter._calls.submit(time.sleep, task_s)  # a refit or heap give-back still running when the daemon stops
    time.sleep(0.5)  # it reaches the refit process (one that has not is cancelled by the shutdown)
    refitter.shutdown(timeout_s=timeout_s)


@pytest.mark.parametrize(("task_s", "timeout_s", "bound_s"), [(0.0, 10.0, 3.0), (2.0, 10.0, 4.0), (30.0, 1.0, 4.0)],
                         ids=["idle", "task finishes", "task killed"])  # fmt: skip
def test_a_lane_ends_when_its_refit_process_is_stopped(task_s: float, timeout_s: float, bound_s: float) -> None:
    # before: shutdown did not wait, and a lane returning while its refit task ran never ended (multiprocessing's
    # exit handler closed the pool's queue before the pool could send its worker the stop; both waited for ever)
    proc = multiprocessing.get_context("spawn").Process(target=_lane, args=(task_s, timeout_s))
    t0 = time.monotonic()
    proc.start()
    proc.join(30.0)
    alive = proc.is_alive()
    if alive:
        proc.kill()
        proc.join(5.0)
    assert not alive and proc.exitcode == 0, "the lane did not end"
    took = time.monotonic() - t0
    assert min(task_s, timeout_s) < took < bound_s + 5.0, took  # (a spawned interpreter's start: ~1 s)
