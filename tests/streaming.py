"""Helpers for daemon tests: a daemon running in the test's event loop, free ports, a Mosquitto process."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from rtsearch.config import ServeConfig
from rtsearch.search.target import SearchTarget
from rtsearch.serve.daemon import Daemon
from rtsearch.types import Spectrum
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, replay

# Each pytest-xdist worker picks ports in a block of its own below Linux's ephemeral range (32768-60999), where
# nothing bound to port 0 lands: a port one worker chose and let go is never another's, nor a daemon's ``:*``.
PORTS_PER_WORKER = 2_000
_next_port = itertools.count()


def free_port() -> int:
    """A loopback TCP port free now, from this test process's own block (`PORTS_PER_WORKER`, by the xdist worker's
    number; without xdist the first block), tried in turn."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = 10_000 + PORTS_PER_WORKER * (int(worker) if worker.isdigit() else 0) % 22_000
    for _ in range(PORTS_PER_WORKER):
        port = first + next(_next_port) % PORTS_PER_WORKER
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken (by this worker's earlier test, still closing, or another program)
                continue
            return port
    raise RuntimeError(f"no free port in {first}-{first + PORTS_PER_WORKER - 1}")


def serve_config(tmp: Path, **kw: Any) -> ServeConfig:
    """Loopback, free ports, results under ``tmp``; a budget (30 s) no NumPy batch on a busy CI machine misses, so
    shedding decides only the tests that ask for it (a smaller ``budget_ms``, ``max_queue``). Answered identified
    at a running q of 5 %: the test runs hold under 100 confident matches, and under q = (decoys + 1) / targets
    none of them would be at 1 % (`rtsearch.search.fdr`)."""
    base: dict[str, Any] = dict(
        spectra="tcp://127.0.0.1:*", spectra_mode="pull", results="tcp://127.0.0.1:*", metrics_port=0,
        results_dir=str(tmp / "results"), shutdown_timeout_s=60.0, budget_ms=30_000.0, identified_at=0.05,
    )
    base.update(kw)
    return ServeConfig(**base)


READY_S = 300.0  # a daemon's start on a busy machine (a cluster starts its workers first): generous, not a timing


@contextlib.asynccontextmanager
async def running(target: SearchTarget, cfg: ServeConfig, **kw: Any) -> AsyncIterator[Daemon]:
    """A daemon serving in this loop; stopped (cleanly) on exit."""
    stop = asyncio.Event()
    daemon = Daemon(target, cfg, **kw)
    task = asyncio.create_task(daemon.run(stop))
    ready = asyncio.create_task(daemon.ready.wait())
    await asyncio.wait({task, ready}, timeout=READY_S, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if task.done():
        task.result()
    if not daemon.ready.is_set():  # stopped before the test fails: nothing of it runs into the next test
        stop.set()
        await asyncio.wait_for(task, 120)
        raise AssertionError(f"daemon did not become ready within {READY_S:.0f} s")
    try:
        yield daemon
    finally:
        stop.set()
        await asyncio.wait_for(task, 120)


def exchange(daemon: Daemon, frames: list[list[bytes]], answers: int) -> Collector:
    """Push ``frames`` to the daemon (as they are) and collect its answers until ``answers`` came (or 10 s passed
    without one)."""
    col = Collector(daemon.endpoints.results).start()
    with Sender(daemon.endpoints.spectra, mode="push", wait_s=20) as s:
        for f in frames:
            s.send(f)
    col.wait(answers, idle_s=10, timeout_s=120)
    col.stop()
    return col


async def replay_through(
    daemon: Daemon, runs: list[tuple[str, list[Spectrum]]], *, rate: float, idle_s: float = 30, timeout_s: float = 300
) -> tuple[Sent, Collector]:
    """Push ``runs`` to the daemon at ``rate`` spectra/s (simulator) and collect every answer (collector)."""

    def simulate() -> tuple[Sent, Collector]:
        col = Collector(daemon.endpoints.results).start()
        sent = Sent()
        with Sender(daemon.endpoints.spectra, mode="push") as s:
            replay(s, runs, speed=None, rate=rate, sent=sent)
        col.wait(len(sent.ms2), idle_s=idle_s, timeout_s=timeout_s)
        col.stop()
        return sent, col

    return await asyncio.to_thread(simulate)


class ServeProcess:
    """``rtsearch serve ARGS`` as a process, its stderr lines collected by a thread; ``--budget-ms 30000`` and
    ``--identified-at 0.05`` unless ARGS give them (as `serve_config`)."""

    def __init__(self, args: list[str], *, env: dict[str, str] | None = None, prefix: tuple[str, ...] = (),
                 python: str = sys.executable) -> None:  # fmt: skip
        """``env``: more environment; ``prefix``: a command to run it under (``setpriv --reuid …``)."""
        if "--budget-ms" not in args and "--help" not in args:
            args = [*args, "--budget-ms", "30000"]
        if "--identified-at" not in args and "--help" not in args:
            args = [*args, "--identified-at", "0.05"]
        self.proc = subprocess.Popen(
            [*prefix, python, "-m", "rtsearch.cli", "serve", *args], stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )  # fmt: skip
        self.lines: list[str] = []
        self._cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cv:
                self.lines.append(line)
                self._cv.notify_all()

    @property
    def log(self) -> str:
        with self._cv:
            return "".join(self.lines)

    def wait_for(self, text: str | tuple[str, ...], timeout: float, count: int = 1) -> bool:
        """Whether ``count`` lines holding ``text`` (one of them, given several) came within ``timeout`` seconds."""
        texts = (text,) if isinstance(text, str) else text
        with self._cv:
            return self._cv.wait_for(lambda: sum(any(t in line for t in texts) for line in self.lines) >= count,
                                     timeout)  # fmt: skip

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


def scrape(port: int) -> dict[str, float]:
    """The daemon's /metrics as {'name{labels}': value} (no comments)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


class Mosquitto:
    """A private Mosquitto broker on a free loopback port (never the system one)."""

    def __init__(self, workdir: Path) -> None:
        exe = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None)
        if exe is None:
            raise RuntimeError("mosquitto is not installed (Debian package 'mosquitto'; .ci/run installs it)")
        self.exe = exe
        self.port = free_port()
        self.conf = workdir / "mosquitto.conf"
        self.conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Mosquitto:
        self.proc = subprocess.Popen([self.exe, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"mosquitto did not listen on {self.port}")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextlib.contextmanager
def mosquitto(workdir: Path) -> Iterator[Mosquitto]:
    broker = Mosquitto(workdir).start()
    try:
        yield broker
    finally:
        broker.kill()
