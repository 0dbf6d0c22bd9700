"""What a test leaves running: Python threads of the test process and processes descended from it (issue 68).

A thread or process a test started that outlives it slows the tests after it and can break them (a leaked cluster
thread once made a later unit test's pool spawn instead of fork). `left_behind` compares with what ran before the
test, waiting up to a generous grace for things that are ending on their own (a pool's idle threads, a child reaping
its own); what the fixtures of wider scope started before the test is not the test's. multiprocessing's fork server
and resource tracker live as long as the interpreter by design, and Ray's own processes as long as its cluster (a
module's fixture): neither is counted.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

GRACE_S = 30.0  # what is still ending may take this long (a daemon's children after its stop on a busy machine)
# processes that outlive a test by design (a substring of their command line)
LIFELONG = ("multiprocessing.forkserver", "multiprocessing.resource_tracker", "/ray/", "raylet", "gcs_server",
            "ray::", "default_worker.py")  # fmt: skip


@dataclass(frozen=True)
class Running:
    """Python threads (by ident) and descendant processes (by pid) running at one moment."""

    threads: dict[int, str]
    processes: dict[int, str]


def _processes() -> dict[int, str]:
    """This process's descendants that have not exited (zombies left out): pid -> command line."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
        if fields and fields[0] != "Z":
            parent[int(entry)] = int(fields[1])
    out, todo = {}, [os.getpid()]
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        for child in children.get(todo.pop(), []):
            try:
                with open(f"/proc/{child}/cmdline", "rb") as fh:
                    out[child] = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            todo.append(child)
    return out


def running() -> Running:
    return Running({t.ident: t.name for t in threading.enumerate() if t.ident is not None}, _processes())


def _new(before: Running) -> list[str]:
    now = running()
    threads = [f"thread {name!r}" for ident, name in now.threads.items() if ident not in before.threads]
    procs = [f"process {pid} ({cmd[:120]})" for pid, cmd in now.processes.items()
             if pid not in before.processes and not any(k in cmd for k in LIFELONG)]  # fmt: skip
    return threads + procs


def left_behind(before: Running, grace_s: float = GRACE_S) -> list[str]:
    """What runs now that did not before ``before`` and is still running after ``grace_s``."""
    deadline = time.monotonic() + grace_s
    while (left := _new(before)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
