"""A Ctrl-C in the terminal reaches every process of the foreground group: the daemon's children never die of it,
not even while they still import (issue 73: a ``KeyboardInterrupt`` traceback from ``ForkServerProcess-1``)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rtsearch.serve.children.child import Child
from tests.unit.slow_import_child import wait_closed


@pytest.mark.parametrize("fork", [True, False], ids=["fork server", "spawned"])
def test_a_child_still_importing_outlives_a_ctrl_c(fork, capfd):
    before = signal.getsignal(signal.SIGINT)
    child = Child("sigint-test", wait_closed, fork=fork).start()
    try:
        time.sleep(0.5)  # well inside its 3 s import (its main's module sleeps there)
        os.kill(child.proc.pid, signal.SIGINT)
        assert not child.join(5.0) and child.proc.is_alive()
    finally:
        child.stop(30.0)
    assert child.proc.exitcode == 0
    assert "KeyboardInterrupt" not in capfd.readouterr().err
    assert signal.getsignal(signal.SIGINT) is before  # the parent's handler as it was
