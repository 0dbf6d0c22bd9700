"""Runs spread over daemon processes: K lanes behind one front (``rtsearch serve --lanes K``).

One daemon process answers ~20,000 spectra a second whatever the GPU does: its event loop, engine thread and
results thread share one GIL (docs/history/RESULTS.md, "Runs spread over daemon processes"). Runs are independent — each
has its own running q-values, journal, results file and MQTT topics — so K whole daemons ("lanes"), each owning the
runs it is given, multiply what the shell can do; they share the machine's GPU (one engine process each, the target
opened by each).

::

                                          ┌─ registry: run → lane (a thread here) ─┐
    instrument ──▶ door (C proxy) ──▶ intake_0..N-1 ══chunks by run══▶ lane_0 … lane_K-1 ──▶ results fan-in (C) ──▶
                   spectra socket     (processes: read, decode,         (daemons, one a      results socket
                                       answer shed at each lane's door)  process)

- The **door** (`rtsearch.serve.intake.door`) binds (or connects) the spectra socket and spreads its messages over N
  **intake processes** (`rtsearch.serve.intake.intake_process`, as behind a lone daemon's door), each of which decodes
  what it reads and hands each lane, over a socket pair of its own, the rows of that lane's runs
  (`rtsearch.serve.intake.routing.split`), answering ``shed`` at that lane's door what its advice says would be late.
  A run's lane is decided once by the **registry** (the lane with the fewest open runs) and kept; every intake
  process asks it, so all agree.
- Each **lane** is a `rtsearch.serve.daemon.Daemon` in a process of its own (`rtsearch.serve.service.lane_main`: the
  same service; its `rtsearch.serve.intake.intake.Lane` holds its socket pairs, advice words and door-answers
  endpoint): batcher, engine process, run book, journals, MQTT client; on a host with several GPUs lane k scores on
  GPU k mod G (``CUDA_VISIBLE_DEVICES`` set in its process, the list given to the front kept) — or, scoring through
  a cluster of N workers of its own (``--cluster N``), sees every GPU, its list turned to start at GPU k·N mod G,
  so that its workers (worker i on the i-th: `rtsearch.cluster.placement.LocalPlacement`) follow the previous
  lane's round the GPUs: a partition's pieces each on a GPU of their own, not all on the lane's (`lane_device`) —
  or, shared (``[serve] lane_workers``: "auto" when the target does not fit each lane's workers whole), the lanes'
  doors send to one cluster of N workers, started by lane 0 (`rtsearch.cluster.share`: each piece held once, each
  worker batching what every lane sends). Several intake
  processes hand it a run's messages in no set order, so it waits for ``run.end``'s ``n_spectra`` as behind several
  intakes. Only lane 0 finishes the journals an earlier daemon left (before any lane is fed).
- The **results fan-in** (XSUB → XPUB, ZeroMQ's C proxy) carries the lanes' answers to the one results socket.
- ``/metrics`` here is every lane's, scraped when asked and labelled ``lane`` (`rtsearch.serve.observe.lane_metrics`),
with
  ``rtsearch_lane_runs_total``; ``/readyz`` is ready once every lane is; a lane, an intake process or the door that
  stops stops the front (it exits non-zero after the others answered what they had), as a lone daemon's part does.

Stopping: the door stops reading, each intake process reads what it still holds, hands it over and closes its
socket pairs; each lane, its intake closed, stops as a lone daemon does (answering what it received, writing its
runs' files); then the results fan-in closes.
"""

from __future__ import annotations

import contextlib
import logging
import select
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from rtsearch.cluster.serve import may_share
from rtsearch.cluster.share import Share
from rtsearch.config import ServeConfig
from rtsearch.config.environment import tuning
from rtsearch.errors import EndpointError, ServiceError
from rtsearch.serve.children.child import Child, ChildGone, socket_pair
from rtsearch.serve.children.proxy import Forwarder
from rtsearch.serve.children.runtime import gpu_of
from rtsearch.serve.engine.admission import Advice
from rtsearch.serve.intake.chunks import stop_message
from rtsearch.serve.intake.door import Door, default_intakes
from rtsearch.serve.intake.intake import PIPE_BYTES, Lane
from rtsearch.serve.intake.intake_process import Shedding, serve
from rtsearch.serve.intake.routing import Registry
from rtsearch.serve.observe.http import Health
from rtsearch.serve.observe.lane_metrics import LaneMetrics
from rtsearch.serve.runs.finish import check_results_folder
from rtsearch.serve.runs.folder_lock import FolderLock
from rtsearch.serve.runs.journal import FOLDER

log = logging.getLogger(__name__)

START_S = 900.0  # a lane may take this long to open its target and become ready
INTAKE_START_S = 60.0
SUPERVISE_S = 0.2
INTAKE_STOP_S = 10.0  # intake processes hand over what they hold within this (their drain is at most 1 s)
DRAIN_S = 0.5  # after the lanes exit, the results fan-in forwards their last answers for this long
# ZeroMQ I/O threads of the door and of the results fan-in: each carries every lane's messages (4 measured no better
# at 100,000 /s, docs/history/RESULTS.md 2026-12-01; the ``io_threads`` knob: bench)
IO_THREADS = 2


def io_threads() -> int:
    """`IO_THREADS`, or the ``io_threads`` knob (`rtsearch.config.environment`)."""
    given = tuning().io_threads
    return IO_THREADS if given is None else given


def _bound() -> socket.socket:
    """A loopback TCP socket bound to a free port, for a lane's /metrics: held from the moment its port is chosen (a
    port picked, let go, and bound by the lane seconds later was once taken in between: a lane of eight failed to
    start, docs/history/RESULTS.md 2026-11-29 13:01)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


class _Lane:
    """One lane daemon: its process, where it listens, its door's advice words."""

    def __init__(self, index: int, folder: Path, intakes: int) -> None:
        self.index = index
        self.results = f"ipc://{folder / f'lane{index}-results'}"
        self.answers = f"ipc://{folder / f'lane{index}-answers'}"  # its door's answers, from the intake processes
        self.listener: socket.socket | None = _bound()  # the lane's /metrics socket until the lane has it
        self.metrics_port = int(self.listener.getsockname()[1])
        self.advice = Advice(intakes=intakes).shared
        self.child: Child | None = None


def lane_device(index: int, gpus: int, cluster: int = 0) -> str:
    """Lane ``index``'s ``CUDA_VISIBLE_DEVICES`` on a host of ``gpus`` GPUs ("": as inherited, no GPU): GPU index mod
    gpus; with a cluster of ``cluster`` workers a lane, every GPU, the list turned to start at index × cluster mod
    gpus (its worker i on the i-th; the lanes' workers round the GPUs in turn)."""
    if gpus <= 0:
        return ""
    if cluster <= 0:
        return gpu_of(index % gpus)
    start = index * cluster
    return ",".join(gpu_of((start + j) % gpus) for j in range(gpus))


class Front:
    """``Front(cfg, lane_main).run(stop)``: the lanes' front until ``stop`` is set; see the module docstring."""

    def __init__(self, cfg: ServeConfig, lane_main: Callable[[socket.socket, str, int, Lane], None], *,
                 health: Health | None = None, gpus: int = 0) -> None:  # fmt: skip
        """``lane_main(conn, results, metrics_port, lane)``: a lane process's main (a `Child`'s: ready once its daemon
        serves), picklable (`rtsearch.serve.service.lane_main`: the service, as that lane, with that results endpoint
        and metrics port); ``gpus``: the GPUs to spread the lanes
        (or their clusters' workers) over (`lane_device`); 0: each as inherited."""
        self.cfg, self.lane_main, self.gpus = cfg, lane_main, gpus
        self.health = health or Health()
        self.folder = Path(tempfile.mkdtemp(prefix="rtsearch-lanes-"))  # 0700: its ipc endpoints are this user's alone
        self.intakes = cfg.intakes or default_intakes()
        self.lanes = [_Lane(k, self.folder, self.intakes) for k in range(cfg.lanes)]
        self.metrics = LaneMetrics([lane.metrics_port for lane in self.lanes])
        self.endpoints: dict[str, str] = {}
        self.metrics_port = cfg.metrics_port  # where the front's /metrics listens (its caller's server)
        self.ready = threading.Event()
        self._failure: str | None = None

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set; raises `ServiceError` when a part stopped on its own (after shutting down),
        `EndpointError` when an endpoint cannot be used."""
        cfg = self.cfg
        check_results_folder(cfg.results_dir)  # one folder, one daemon: the front holds it for its lanes
        lock = FolderLock(Path(cfg.results_dir) / FOLDER).acquire()
        ctx: zmq.Context[Any] = zmq.Context(io_threads=io_threads())
        xsub, xpub = ctx.socket(zmq.XSUB), ctx.socket(zmq.XPUB)
        door: Door | None = None
        forwarder: Forwarder | None = None
        registry: Registry | None = None
        intakes: list[Child] = []
        pipes: list[list[tuple[socket.socket, socket.socket]]] = []
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
            # bound before the lanes start (tens of seconds with a cluster): a port in use is said at once, and no
            # other process takes it meanwhile; what comes before the intake processes waits in the socket
            door = Door(cfg.spectra, mode=cfg.spectra_mode, io_threads=io_threads())
            self.health.set(state=f"starting {len(self.lanes)} lanes")
            # [intake][lane]: (the lane's end, the intake's)
            pipes = [[socket_pair(PIPE_BYTES) for _ in self.lanes] for _ in range(self.intakes)]
            self._start_lanes(pipes)
            self._wait_lanes(stop)
            if not stop.is_set() and not self._failure:  # (a lane that failed to start: shut down, raise below)
                registry = Registry(ctx, f"ipc://{self.folder / 'registry'}", len(self.lanes))
                self.metrics.runs = registry.runs
                intakes = self._start_intakes(door.inner, registry.endpoint, [[p[1] for p in row] for row in pipes])
                door.start()
                self.endpoints["spectra"] = door.endpoint
                self.health.set(ready=True)
                self.ready.set()
                log.info("ready: spectra %s (%s, %d lanes, %d intake processes), results %s, metrics :%s",
                         door.endpoint, cfg.spectra_mode, len(self.lanes), len(intakes), self.endpoints["results"],
                         self.metrics_port)  # fmt: skip
                self._supervise(stop, door, intakes, registry)
        finally:
            self.health.set(ready=False)
            for row in pipes:  # not handed to intake processes (a lane failed to start): the lanes see the end
                for _, theirs in row:
                    theirs.close()
            self._shutdown(door, intakes)
            if forwarder is not None:
                time.sleep(DRAIN_S)
                forwarder.stop()
            if registry is not None:
                registry.close()
            xsub.close(0)
            xpub.close(1000)
            ctx.term()
            shutil.rmtree(self.folder, ignore_errors=True)
            lock.release()
        if self._failure:
            raise ServiceError(f"{self._failure}; shut down after the lanes answered what they received")

    def _fail(self, why: str) -> None:
        if self._failure is None:
            log.error("%s: shutting down", why)
            self._failure = why
            self.health.set(failure=why)

    def _start_lanes(self, pipes: list[list[tuple[socket.socket, socket.socket]]]) -> None:
        shared = may_share(self.cfg)  # each lane decides, all alike (`rtsearch.cluster.serve.plan`)
        for lane in self.lanes:
            share = Share(str(self.folder), lane.index, len(self.lanes)) if shared else None
            mine = Lane(lane.index, [row[lane.index][0] for row in pipes], lane.advice, lane.answers,
                        device=lane_device(lane.index, self.gpus, self.cfg.cluster), share=share,
                        metrics=lane.listener)  # fmt: skip
            # not ended with the front: a lane whose intake closes answers what it holds and writes its runs first
            lane.child = Child(f"lane-{lane.index}", self.lane_main, lane.results, lane.metrics_port, mine,
                               with_parent=False, daemon=False).start()  # fmt: skip
            if lane.listener is not None:  # the lane has its own copy (the port stays bound)
                lane.listener.close()
                lane.listener = None
            for row in pipes:
                row[lane.index][0].close()  # the lane has its own copy: its exit is the intake's end of file

    def _wait_lanes(self, stop: threading.Event) -> None:
        """Until every lane said it is ready (its daemon serves), one fails, ``stop`` is set, or `START_S` passed."""
        deadline = time.monotonic() + START_S
        waiting = {lane.child.conn: (lane.index, lane.child) for lane in self.lanes if lane.child and lane.child.conn}
        while waiting and not stop.is_set():
            for conn in select.select(list(waiting), [], [], SUPERVISE_S)[0]:
                index, child = waiting.pop(conn)
                try:
                    child.wait_ready(1.0)
                except ChildGone as e:
                    ended = child.join(1.0)
                    self._fail(f"lane {index} exited with {child.proc.exitcode} while starting" if ended
                               else f"lane {index}: {e}")  # fmt: skip
                    return
            if waiting and time.monotonic() > deadline:
                self._fail(f"{len(waiting)} lane(s) not ready within {START_S:.0f} s")
                return

    def _start_intakes(self, inner: str, registry: str, pipes: list[list[socket.socket]]) -> list[Child]:
        """The intake processes behind the door, each handing over to every lane; started when each said ready."""
        sheddings = [Shedding(lane.answers, lane.advice, self.cfg.budget_ms) for lane in self.lanes]
        intakes = []
        for k, conns in enumerate(pipes):
            intakes.append(Child(f"intake-{k}", serve, conns, inner, "door", 0, self.intakes, sheddings, k,
                                 self.cfg.elution, registry).start())  # fmt: skip
            for sock in conns:
                sock.close()
        for child in intakes:
            child.wait_ready(INTAKE_START_S)  # raises ChildGone (a ServiceError) saying why
        return intakes

    def _supervise(self, stop: threading.Event, door: Door, intakes: list[Child], registry: Registry) -> None:
        while not stop.wait(SUPERVISE_S):
            if gone := [lane.index for lane in self.lanes if lane.child is not None and not lane.child.alive()]:
                self._fail(f"lane(s) {gone} exited")
            elif stopped := [c for c in intakes if not c.alive()]:
                self._fail(f"{stopped[0].name} stopped ({stopped[0].why()})")
            elif not door.alive():
                self._fail("the door (the spectra socket's proxy) stopped")
            elif not registry.alive():
                self._fail("the run registry's thread stopped")
            if self._failure:
                return

    def _shutdown(self, door: Door | None, intakes: list[Child]) -> None:
        """The door stops, the intake processes hand over what they hold and close; the lanes then stop."""
        if door is not None:
            door.stop()
        for child in intakes:
            with contextlib.suppress(OSError):
                child.conn.sendall(stop_message())  # type: ignore[union-attr]
        for child in intakes:
            child.stop(INTAKE_STOP_S)  # STOP is in its socket before the end of file
        if door is not None:
            door.close()
        bound = self.cfg.shutdown_timeout_s + 60.0
        for lane in self.lanes:
            if lane.child is not None and not lane.child.join(bound):
                log.error("lane %d did not stop within %.0f s: killed", lane.index, bound)
            if lane.child is not None:
                lane.child.stop(0.0)
