"""The refit process's shutdown (`rtsearch.serve.runs.refits.Refitter.shutdown`) inside a daemon that is a process of
its own, as a lane is: the process ends, at once when its refit process has nothing left, after the task when it
has one still running that finishes within ``timeout_s``, and at ``timeout_s`` (the refit process killed) when not."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from rtsearch.serve.runs.refits import Refitter


def _lane(task_s: float, timeout_s: float, took) -> None:
    """A lane's life in short: a refit process started, a task handed to it, shutdown while it runs, main returns;
    ``took``: seconds from the task's hand-over to the shutdown's return."""
    refitter = Refitter()
    refitter.start().result()
    t0 = time.monotonic()
    refitter._calls.submit(time.sleep, task_s)  # a refit or heap give-back still running when the daemon stops
    time.sleep(0.5)  # it reaches the refit process (one that has not is cancelled by the shutdown)
    refitter.shutdown(timeout_s=timeout_s)
    took.value = time.monotonic() - t0


@pytest.mark.parametrize(("task_s", "timeout_s"), [(0.0, 10.0), (2.0, 10.0), (30.0, 1.0)],
                         ids=["idle", "task finishes", "task killed"])  # fmt: skip
def test_a_lane_ends_when_its_refit_process_is_stopped(task_s: float, timeout_s: float) -> None:
    # before: shutdown did not wait, and a lane returning while its refit task ran never ended (multiprocessing's
    # exit handler closed the pool's queue before the pool could send its worker the stop; both waited for ever)
    ctx = multiprocessing.get_context("spawn")
    took = ctx.Value("d", -1.0)
    proc = ctx.Process(target=_lane, args=(task_s, timeout_s, took))
    proc.start()
    proc.join(60.0)  # generous: a spawned interpreter's start on a busy machine
    alive = proc.is_alive()
    if alive:
        proc.kill()
        proc.join(5.0)
    assert not alive and proc.exitcode == 0, "the lane did not end"
    # the task starts after its hand-over; the shutdown, 0.5 s after it, waits for it to end or for the timeout
    if task_s == 0:  # nothing to wait for
        assert 0.5 <= took.value < timeout_s, took.value
    elif task_s < timeout_s:  # waited for the task, not for the timeout
        assert task_s <= took.value < 0.5 + timeout_s, took.value
    else:  # waited the timeout, then killed it: not the task's 30 s
        assert 0.5 + timeout_s <= took.value < task_s, took.value
