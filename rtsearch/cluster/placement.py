"""Where cluster workers run and who restarts them: Ray actors, or processes of this host.

- `RayPlacement` (``placement = "ray"``): one actor a worker on a Ray cluster (``ray_address``; empty: a local
  one started here), each asking for ``gpus_per_worker`` GPUs (0: a CPU share), ``max_restarts=-1``: Ray
  restarts an actor whose process dies, and the actor's constructor starts the worker loop again (same name,
  same piece). Ray places and supervises; the spectra never travel through Ray (`rtsearch.cluster.worker`).
- `LocalPlacement` (``placement = "local"``): spawned processes of this host, restarted by a supervising thread
  when one fails (exits other than 0: a worker ends with 0 only when told to stop), spread over the host's GPUs
  (``gpus_per_worker`` > 0) — for one host, or a machine without Ray.

Both: `start`, `exited` (the pids of worker processes seen to end other than when told to: the door calls such a
worker dead at once instead of waiting out its silence; Ray's restarts are seen by heartbeat alone), `close`. A
worker's `WorkerSpec` carries its door's CURVE keys off loopback (`rtsearch.cluster.auth`): a local process gets
them as its arguments (a pipe of this host's), a Ray actor as its constructor's (Ray's own channel, as trusted as
the code Ray runs: TLS with ``RAY_USE_TLS``, or a private network).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from typing import Any, Protocol

from rtsearch.cluster.worker import WorkerSpec, process_main, run_worker
from rtsearch.errors import ServiceError
from rtsearch.serve.children.child import Child

log = logging.getLogger(__name__)


class Placement(Protocol):
    def start(self, specs: list[WorkerSpec]) -> None: ...

    def exited(self) -> frozenset[int]: ...

    def close(self) -> None: ...


class LocalPlacement:
    """Workers as spawned processes of this host, each restarted when it exits (see the module docstring)."""

    def __init__(self, *, gpus: int = 0) -> None:
        """``gpus``: GPUs of this host to spread the workers over (worker k on GPU k mod gpus); 0: as inherited."""
        self.gpus = gpus
        self._procs: dict[str, Child] = {}
        self._specs: dict[str, WorkerSpec] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, name="cluster-supervisor", daemon=True)
        self.restarts = 0
        self._exited: frozenset[int] = frozenset()  # pids of workers that ended unasked (replaced, not appended to)

    def start(self, specs: list[WorkerSpec]) -> None:
        for k, spec in enumerate(specs):
            if self.gpus > 0:
                spec = dataclasses.replace(spec, device=k % self.gpus)
            self._specs[spec.name] = spec
            self._spawn(spec)
        self._thread.start()

    def _spawn(self, spec: WorkerSpec) -> None:
        child = Child(spec.name, process_main, spec, keep_sigterm=True).start()  # its handshake is with its door
        with self._lock:
            self._procs[spec.name] = child

    def _supervise(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                gone = [(n, c) for n, c in self._procs.items() if not c.alive()]
            for name, child in gone:
                if self._stop.is_set():
                    return
                child.stop(0.0)
                if child.proc.exitcode == 0:  # it ended when asked (every door it serves said stop)
                    log.info("cluster: %s stopped", name)
                    with self._lock:
                        del self._procs[name]
                    continue
                log.warning("cluster: %s exited (%s): restarting it", name, child.why())
                self._exited = self._exited | {child.proc.pid}
                self.restarts += 1
                self._spawn(self._specs[name])

    def exited(self) -> frozenset[int]:
        """Pids of this placement's workers that ended other than when told to (seen within 0.1 s)."""
        return self._exited

    def close(self, grace_s: float = 5.0) -> None:
        """Stop supervising; the workers (told to stop by their doors) end within ``grace_s``, else killed."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2.0)
        with self._lock:
            procs = dict(self._procs)
        deadline = time.monotonic() + grace_s
        for name, child in procs.items():
            if child.join(max(deadline - time.monotonic(), 0.0)) and child.proc.exitcode == 0:
                log.info("cluster: %s stopped", name)
            elif child.alive():
                log.warning("cluster: %s did not stop within %.0f s of being told: killed", name, grace_s)
            child.stop(0.0)


class RayPlacement:
    """Workers as Ray actors (see the module docstring)."""

    def __init__(self, *, address: str = "", gpus_per_worker: float = 0.0, cpus_per_worker: float = 1.0) -> None:
        try:
            import ray
        except ImportError:
            raise ServiceError("placement = \"ray\" needs Ray: pip install 'rtsearch[cluster]'") from None
        self.ray = ray
        self.address = address
        self.gpus, self.cpus = gpus_per_worker, cpus_per_worker
        self._actors: list[Any] = []
        self._started_here = False

    def start(self, specs: list[WorkerSpec]) -> None:
        ray = self.ray
        if not ray.is_initialized():
            cpus = None if self.address else max(os.cpu_count() or 1, int(len(specs) * self.cpus + 1))
            ray.init(address=self.address or None, num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, ignore_reinit_error=True)  # fmt: skip
            self._started_here = True
        actor = ray.remote(max_restarts=-1, max_task_retries=0)(WorkerActor)
        for spec in specs:
            # named by worker and front door (its port): daemons after one another on one Ray cluster do not clash
            name = f"rtsearch-{spec.name}-{spec.router.rsplit(':', 1)[-1]}"
            self._actors.append(actor.options(name=name, num_cpus=self.cpus,
                                              num_gpus=self.gpus).remote(spec))  # fmt: skip

    def exited(self) -> frozenset[int]:
        """None seen here: Ray restarts an actor's process itself, and the door hears of it by its heartbeat."""
        return frozenset()

    def close(self) -> None:
        for a in self._actors:
            with contextlib.suppress(Exception):  # already gone
                self.ray.kill(a, no_restart=True)
        self._actors.clear()
        if self._started_here:
            self.ray.shutdown()


class WorkerActor:
    """A Ray actor running `run_worker` in a thread of its process (Ray restarts the process; this constructor
    then starts the loop again)."""

    def __init__(self, spec: WorkerSpec) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=run_worker, args=(spec, self._stop), name=spec.name, daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        return self._thread.is_alive()
