"""Helpers for daemon tests: a daemon running in the test's event loop, free ports, a Mosquitto process."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from rtsearch.config import ServeConfig
from rtsearch.daemon import Daemon
from rtsearch.engine import Engine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_config(tmp: Path, **kw: Any) -> ServeConfig:
    """Loopback, free ports, NumPy, results under ``tmp``."""
    base: dict[str, Any] = dict(
        spectra="tcp://127.0.0.1:*", spectra_mode="pull", results="tcp://127.0.0.1:*", metrics_port=0,
        backend="numpy", results_dir=str(tmp / "results"), shutdown_timeout_s=60.0,
    )
    base.update(kw)
    return ServeConfig(**base)


@contextlib.asynccontextmanager
async def running(engine: Engine, cfg: ServeConfig, **kw: Any) -> AsyncIterator[Daemon]:
    """A daemon serving in this loop; stopped (cleanly) on exit."""
    stop = asyncio.Event()
    daemon = Daemon(engine, cfg, **kw)
    task = asyncio.create_task(daemon.run(stop))
    ready = asyncio.create_task(daemon.ready.wait())
    await asyncio.wait({task, ready}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    assert daemon.ready.is_set(), "daemon did not become ready"
    try:
        yield daemon
    finally:
        stop.set()
        await asyncio.wait_for(task, 120)


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
