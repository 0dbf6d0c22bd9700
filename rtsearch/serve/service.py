"""The daemon as a service: a lone daemon or the lanes' front, as the configuration says, until SIGINT or SIGTERM.

`serve` is what ``rtsearch serve`` runs once it has read its configuration: /metrics and health from the first
moment, the target opened, the `rtsearch.serve.daemon.Daemon` run (systemd told when it is ready and when it stops);
with ``[serve] lanes`` > 1 the lanes' front (`rtsearch.serve.lanes.Front`) instead, whose lanes each run `lane_main`
— the same service, as lane k, in a child process. A `Service` is picklable: a lane gets it whole and parses nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import socket
import threading
from dataclasses import dataclass
from typing import Any

from rtsearch.config import BackendName, Config, resolved_dict
from rtsearch.errors import EndpointError, RtsearchError
from rtsearch.logs import LogFormat
from rtsearch.search.choice import TargetChoice
from rtsearch.serve.intake.intake import Lane

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Service:
    """What to serve: the configuration (its ``serve`` section as the command line set it), the target, the backend
    it scores on, the command line (the run files' provenance) and how to log (a lane configures its own)."""

    cfg: Config
    target: TargetChoice
    backend: BackendName
    command: list[str]
    log_level: int = logging.INFO
    log_format: LogFormat = "text"


def serve(service: Service) -> int:
    """Run ``service`` until SIGINT or SIGTERM; its exit code (raises `RtsearchError` subclasses)."""
    if service.cfg.serve.lanes > 1:
        return _front(service)
    _daemon(service, None)
    return 0


def _daemon(service: Service, lane: Lane | None) -> None:
    """One daemon (``lane``: as that lane of the front), serving until told to stop."""
    from rtsearch.io import provenance
    from rtsearch.scoring.backend import get_backend
    from rtsearch.serve.daemon import Daemon
    from rtsearch.serve.observe.metrics import DaemonMetrics

    cfg, backend = service.cfg.serve, get_backend(service.backend)
    log.info("backend %s (%s); serve settings %s", backend.name, backend.device, resolved_dict(cfg))
    metrics = DaemonMetrics()  # /metrics, /healthz, /readyz (503 "loading the target") before the target loads
    with metrics.serve(cfg.metrics_port, cfg.metrics_host, bound=lane.metrics if lane is not None else None):
        metrics.health.set(state="loading the target")
        # a cluster's workers score on the backend; its front door only routes and names: the target stays here
        target = service.target.open(get_backend("numpy") if cfg.cluster else backend)
        metrics.health.set(state="starting")
        daemon = Daemon(target, cfg, metrics=metrics, cluster_backend=backend.name, lane=lane)
        # what writes each run file, beside it (and in Parquet's metadata): rtsearch.io.provenance
        daemon.ends.provenance = provenance.record(command=service.command, config=resolved_dict(service.cfg),
                                                   target=service.target.path)  # fmt: skip
        asyncio.run(_run(daemon))


async def _run(daemon: Any) -> None:
    """Run ``daemon`` until SIGINT or SIGTERM, telling systemd when it is ready and when it stops."""
    from rtsearch.serve.observe.systemd import notify

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # a lane: the front decides when it stops (it ends its intake)
        loop.add_signal_handler(sig, stop.set) if daemon.lane is None else signal.signal(sig, signal.SIG_IGN)
    serving = asyncio.create_task(daemon.run(stop))
    ready = asyncio.create_task(daemon.ready.wait())
    await asyncio.wait({serving, ready}, return_when=asyncio.FIRST_COMPLETED)
    if ready.done() and not serving.done():
        e = daemon.endpoints
        notify("READY=1", f"STATUS=serving: spectra {e.spectra}, results {e.results}, metrics :{e.metrics_port}")
        await asyncio.wait({serving, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED)
        notify("STOPPING=1", "STATUS=stopping: answering what was received, writing results")
    ready.cancel()
    await serving


def _front(service: Service) -> int:
    """``lanes`` > 1: the front of that many lane daemons (`rtsearch.serve.lanes`), until SIGINT or SIGTERM."""
    import functools

    from prometheus_client import CollectorRegistry

    from rtsearch.serve.children.runtime import host_gpus
    from rtsearch.serve.lanes import Front
    from rtsearch.serve.observe.http import MetricsServer
    from rtsearch.serve.observe.systemd import notify

    cfg = service.cfg.serve
    front = Front(cfg, functools.partial(lane_main, service), gpus=host_gpus() if service.backend != "numpy" else 0)
    registry = CollectorRegistry()
    registry.register(front.metrics)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        http = MetricsServer(registry, front.health, port=cfg.metrics_port, host=cfg.metrics_host)
    except OSError as e:
        raise EndpointError(f"metrics port {cfg.metrics_host}:{cfg.metrics_port}: {e.strerror or e}") from None

    def tell_systemd() -> None:
        while not front.ready.wait(0.5):
            if stop.is_set():
                return
        e = front.endpoints
        notify("READY=1", f"STATUS=serving: spectra {e['spectra']}, results {e['results']}, metrics :{http.port}")

    with http:
        front.metrics_port = http.port
        threading.Thread(target=tell_systemd, name="notify", daemon=True).start()
        try:
            front.run(stop)
        finally:
            notify("STOPPING=1")
    return 0


def lane_main(service: Service, conn: socket.socket, results: str, metrics_port: int, lane: Lane) -> None:
    """A lane's process main (a `rtsearch.serve.children.child.Child` of the front's): ``service`` as lane
    ``lane.index``, with its own results endpoint and metrics port; it says ready on ``conn`` once it serves."""
    from rtsearch.logs import configure
    from rtsearch.serve.children.runtime import name_os_thread

    name_os_thread(f"lane_{lane.index}")  # what ps and /proc/PID/comm say
    os.environ.pop("NOTIFY_SOCKET", None)  # the front tells systemd, not a lane
    if lane.device:  # before CuPy is imported (the target's open)
        os.environ["CUDA_VISIBLE_DEVICES"] = lane.device
    configure(service.log_level, service.log_format)
    cfg = service.cfg  # its `lanes` kept: the GPUs' sharers (a cluster's)
    mine = dataclasses.replace(cfg, serve=dataclasses.replace(cfg.serve, results=results, metrics_port=metrics_port))
    try:
        _daemon(dataclasses.replace(service, cfg=mine), dataclasses.replace(lane, link=conn))
    except RtsearchError as e:
        log.error("lane %d: %s", lane.index, e)
        raise SystemExit(e.exit_code) from None
