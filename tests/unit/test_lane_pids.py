"""The benches' child finder (`bench.rtload_bench.child_pids`): a lane is a child process named ``lane_K``, an intake
process ``intake_K``."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.rtload_bench import child_pids

# a child that names itself as `rtsearch.serve.runtime.name_os_thread` names a lane, then waits to be found
_NAMED = "import ctypes, sys, time; ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0); time.sleep(30)"


def test_the_lanes_among_the_children_are_found_by_name():
    children = [subprocess.Popen([sys.executable, "-c", _NAMED, name]) for name in ("lane_0", "lane_1", "intake_0")]
    try:
        want = {"lane_0": children[0].pid, "lane_1": children[1].pid}
        deadline = time.monotonic() + 10
        while (found := child_pids(os.getpid())) != want and time.monotonic() < deadline:
            time.sleep(0.05)  # each child names itself once it started
        assert found == want  # the child not named a lane is left out
        intake = {"intake_0": children[2].pid}
        while (found := child_pids(os.getpid(), "intake")) != intake and time.monotonic() < deadline:
            time.sleep(0.05)  # it too names itself once it started: on a busy machine after the lanes did
        assert found == intake
        assert child_pids(children[0].pid) == {}  # a process without lanes: none
    finally:
        for c in children:
            c.kill()
            c.wait()
