"""The check every test passes at its end (`tests.leaks`, the autouse fixture in tests/conftest.py) sees a thread or
a process a test left running, and not one that ended within the grace."""

from __future__ import annotations

import subprocess
import sys
import threading

from tests import leaks


def test_a_thread_and_a_process_left_running_are_named() -> None:
    before = leaks.running()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="left-on-purpose")
    thread.start()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        left = leaks.left_behind(before, grace_s=0.5)
        assert "thread 'left-on-purpose'" in left
        assert any(item.startswith(f"process {proc.pid} ") and "time.sleep(60)" in item for item in left), left
    finally:
        stop.set()
        thread.join(10)
        proc.kill()
        proc.wait(10)
    assert leaks.left_behind(before, grace_s=5.0) == []  # ended: nothing left


def test_what_ends_within_the_grace_is_not_counted() -> None:
    before = leaks.running()
    thread = threading.Thread(target=threading.Event().wait, args=(0.3,), name="ends-soon")
    thread.start()
    assert leaks.left_behind(before, grace_s=10.0) == []
    assert not thread.is_alive()
