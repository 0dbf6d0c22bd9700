"""Runs spread over daemon processes: K lanes behind one front (``rtsearch serve --lanes K``).

One daemon process answers ~20,000 spectra a second whatever the GPU does: its event loop, engine thread and
results thread share one GIL (bench/RESULTS.md, "Runs spread over processes"). Runs are independent — each has
its own running q-values, journal, results file and MQTT topics — so K whole daemons ("lanes"), each owning the
runs it is given, multiply what the shell can do; they share the machine's GPU (one engine process each, the
target opened by each).

::

    instrument ──▶ door (C proxy) ──▶ router_0..R-1 ──run──▶ lane_0 … lane_K-1 ──▶ results proxy (C) ──▶ clients
                   spectra socket      (processes)    └─ registry: run → lane       (rtsearch serve, each)  results PUB

- The **door** (`rtsearch.serve.door`) binds (or connects) the spectra socket and spreads its messages over the
  **routers** (`rtsearch.serve.router`, processes): each reads a message's run and pushes it, untouched, to the
  run's lane. A run's lane is decided once by the **registry** (a thread here: the lane holding the fewest open
  runs) and kept; every router asks it, so all agree.
- Each **lane** is ``rtsearch serve`` in a process of its own, run with this command's arguments on private
  ``ipc://`` endpoints (``--lane k``): its own intake, batcher, engine process, run book and journals; several
  routers may hand it a run's messages out of order, so it waits for ``run.end``'s ``n_spectra`` as behind
  several intakes. Only lane 0 finishes the journals an earlier daemon left (before any lane is fed).
- The **results proxy** (XSUB → XPUB, ZeroMQ's C proxy) fans the lanes' answers in to the one results socket.
- ``/metrics`` here is every lane's, scraped when asked and labelled ``lane``, with ``rtsearch_lane_runs_total``;
  ``/readyz`` is ready once every lane is; a lane, router or the door that stops stops the front (it exits
  non-zero after the others answered what they had), as a lone daemon's part does.

Stopping: the door stops reading, the routers pass on what they hold, then each lane stops as a lone daemon
does (answering what it received, writing its runs' files), then the results proxy closes.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import zmq

from rtsearch.config import ServeConfig
from rtsearch.errors import EndpointError, ServiceError
from rtsearch.serve.door import Door, default_intakes
from rtsearch.serve.http import Health
from rtsearch.serve.lane_metrics import LaneMetrics
from rtsearch.serve.proxy import Forwarder
from rtsearch.serve.router import Registry, route

log = logging.getLogger(__name__)

START_S = 900.0  # a lane may take this long to open its target and become ready
SUPERVISE_S = 0.2
ROUTER_STOP_S = 15.0  # routers pass on what they hold within this (their quiet time and linger)
DRAIN_S = 0.5  # after the lanes exit, the results proxy forwards their last answers for this long


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Lane:
    """One lane daemon: its process and where it listens."""

    def __init__(self, index: int, folder: Path) -> None:
        self.index = index
        self.spectra = f"ipc://{folder / f'lane{index}-spectra'}"
        self.results = f"ipc://{folder / f'lane{index}-results'}"
        self.metrics_port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, argv: Sequence[str], cfg: ServeConfig) -> None:
        intakes = cfg.intakes or max(1, default_intakes() // cfg.lanes)
        cmd = [sys.executable, "-m", "rtsearch.cli", *argv, "--spectra", self.spectra, "--spectra-mode", "pull",
               "--results", self.results, "--metrics-port", str(self.metrics_port), "--lanes", "1",
               "--intakes", str(intakes), "--lane", str(self.index)]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}  # the front tells systemd, not a lane
        self.proc = subprocess.Popen(cmd, env=env)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=1.0) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()


class Front:
    """``Front(cfg, argv).run(stop)``: the lanes' front until ``stop`` is set; see the module docstring.

    ``argv``: the ``rtsearch`` arguments each lane runs with (``serve`` and the target's; each lane's endpoints,
    ports and ``--lane`` are added after them)."""

    def __init__(self, cfg: ServeConfig, argv: Sequence[str], *, health: Health | None = None) -> None:
        self.cfg, self.argv = cfg, list(argv)
        self.health = health or Health()
        self.folder = Path(tempfile.mkdtemp(prefix="rtsearch-lanes-"))
        self.lanes = [_Lane(k, self.folder) for k in range(cfg.lanes)]
        self.metrics = LaneMetrics([lane.metrics_port for lane in self.lanes])
        self.endpoints: dict[str, str] = {}
        self.metrics_port = cfg.metrics_port  # where the front's /metrics listens (its caller's server)
        self.ready = threading.Event()
        self._failure: str | None = None

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set; raises `ServiceError` when a part stopped on its own (after shutting down),
        `EndpointError` when an endpoint cannot be used."""
        cfg = self.cfg
        ctx: zmq.Context[Any] = zmq.Context()
        xsub, xpub = ctx.socket(zmq.XSUB), ctx.socket(zmq.XPUB)
        door: Door | None = None
        forwarder: Forwarder | None = None
        registry: Registry | None = None
        routers: list[tuple[Any, Any]] = []
        try:
            xsub.setsockopt(zmq.RCVHWM, 0)
            xpub.setsockopt(zmq.SNDHWM, 0)  # the results socket never drops (as a lone daemon's)
            try:
                xpub.bind(cfg.results)
            except zmq.ZMQError as e:
                raise EndpointError(f"results endpoint {cfg.results}: {e}") from None
            self.endpoints["results"] = xpub.getsockopt_string(zmq.LAST_ENDPOINT)
            for lane in self.lanes:
                xsub.connect(lane.results)
            forwarder = Forwarder(ctx, xsub, xpub, name="results-fan-in").start()
            self.health.set(state=f"starting {len(self.lanes)} lanes")
            for lane in self.lanes:
                lane.start(self.argv, cfg)
            self._wait_lanes(stop)
            if stop.is_set() or self._failure:
                return
            registry = Registry(ctx, f"ipc://{self.folder / 'registry'}", len(self.lanes))
            self.metrics.runs = registry.runs
            door = Door(cfg.spectra, mode=cfg.spectra_mode)
            routers = self._start_routers(door.inner, registry.endpoint)
            door.start()
            self.endpoints["spectra"] = door.endpoint
            self.health.set(ready=True)
            self.ready.set()
            log.info("ready: spectra %s (%s, %d lanes, %d routers), results %s, metrics :%s", door.endpoint,
                     cfg.spectra_mode, len(self.lanes), len(routers), self.endpoints["results"],
                     self.metrics_port)  # fmt: skip
            self._supervise(stop, door, routers)
        finally:
            self.health.set(ready=False)
            self._shutdown(door, routers)
            if forwarder is not None:
                time.sleep(DRAIN_S)
                forwarder.stop()
            if registry is not None:
                registry.close()
            xsub.close(0)
            xpub.close(1000)
            ctx.term()
            with contextlib.suppress(OSError):
                for f in self.folder.iterdir():
                    f.unlink()
                self.folder.rmdir()
        if self._failure:
            raise ServiceError(f"{self._failure}; shut down after the lanes answered what they received")

    def _fail(self, why: str) -> None:
        if self._failure is None:
            log.error("%s: shutting down", why)
            self._failure = why
            self.health.set(failure=why)

    def _wait_lanes(self, stop: threading.Event) -> None:
        deadline = time.monotonic() + START_S
        waiting = list(self.lanes)
        while waiting and not stop.is_set():
            for lane in list(waiting):
                if (code := lane.exited()) is not None:
                    self._fail(f"lane {lane.index} exited with {code} while starting")
                    return
                if lane.ready():
                    waiting.remove(lane)
            if time.monotonic() > deadline:
                self._fail(f"{len(waiting)} lane(s) not ready within {START_S:.0f} s")
                return
            time.sleep(SUPERVISE_S)

    def _start_routers(self, inner: str, registry: str) -> list[tuple[Any, Any]]:
        spawn = multiprocessing.get_context("spawn")
        routers = []
        for k in range(self.cfg.routers or len(self.lanes)):
            ours, theirs = spawn.Pipe()
            proc = spawn.Process(target=route, args=(inner, [lane.spectra for lane in self.lanes], registry, theirs,
                                                     k), name=f"rtsearch-router-{k}", daemon=True)  # fmt: skip
            proc.start()
            theirs.close()
            routers.append((proc, ours))
        for proc, conn in routers:
            if not conn.poll(60) or conn.recv() != "ready":
                raise ServiceError(f"router {proc.name} did not start")
        return routers

    def _supervise(self, stop: threading.Event, door: Door, routers: list[tuple[Any, Any]]) -> None:
        while not stop.wait(SUPERVISE_S):
            if gone := [lane.index for lane in self.lanes if lane.exited() is not None]:
                self._fail(f"lane(s) {gone} exited")
            elif any(not proc.is_alive() for proc, _ in routers):
                self._fail("a router process stopped")
            elif not door.alive():
                self._fail("the door (the spectra socket's proxy) stopped")
            if self._failure:
                return

    def _shutdown(self, door: Door | None, routers: list[tuple[Any, Any]]) -> None:
        """The door stops, the routers pass on what they hold, then the lanes stop as lone daemons do."""
        if door is not None:
            door.stop()
        for _, conn in routers:
            with contextlib.suppress(OSError):
                conn.send("stop")
        for proc, conn in routers:
            proc.join(ROUTER_STOP_S)
            if proc.is_alive():
                proc.kill()
            conn.close()
        if door is not None:
            door.close()
        for lane in self.lanes:
            if lane.proc is not None and lane.proc.poll() is None:
                lane.proc.terminate()
        bound = self.cfg.shutdown_timeout_s + 60.0
        for lane in self.lanes:
            if lane.proc is None:
                continue
            try:
                lane.proc.wait(bound)
            except subprocess.TimeoutExpired:
                log.error("lane %d did not stop within %.0f s: killed", lane.index, bound)
                lane.proc.kill()
                lane.proc.wait(10)
