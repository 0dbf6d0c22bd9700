"""The daemon's HTTP port: Prometheus metrics, liveness and readiness.

=============  ====================================================================================
``/metrics``   the daemon's metrics (Prometheus text or OpenMetrics, as the scraper asks), with the
               process's own (``process_*``: CPU, memory, open files) and Python's (``python_*``)
``/healthz``   200 ``ok`` while the daemon works; 503 with the reason once a part of it failed
``/readyz``    200 ``ready`` while it answers spectra; 503 with what it is doing before (loading the
               target, starting) and after (shutting down)
``/``          a line naming the three; any other path: 404
=============  ====================================================================================

It starts before the target is loaded (`rtsearch.cli.serve`), so an orchestrator sees the daemon
alive but not ready while a large index loads. A handler of its own rather than prometheus_client's
``start_http_server``, whose handler answers every path with the metrics; the metrics themselves are
prometheus_client's encoders, gzipped where the scraper accepts it (Prometheus does: the daemon's ~600 series
are ~60 kB of text), without the ``_created`` series every counter would otherwise double as (off for the
process: `prometheus_client.disable_created_metrics`, when the server is made).
"""

from __future__ import annotations

import gzip
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.exposition import choose_encoder


class Health:
    """What ``/healthz`` and ``/readyz`` say; set from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ready = False
        self.state = "starting"  # why not ready (or "ready")
        self.failure = ""  # why not healthy ("" while healthy)

    def set(self, *, ready: bool | None = None, state: str | None = None, failure: str | None = None) -> None:
        with self._lock:
            if ready is not None:
                self.ready = ready
                self.state = "ready" if ready else self.state if self.state != "ready" else "not ready"
            if state is not None:
                self.state = state
            if failure is not None:
                self.failure = failure

    def read(self) -> tuple[bool, str, str]:
        with self._lock:
            return self.ready, self.state, self.failure


class MetricsServer:
    """``with MetricsServer(registry, health, port=0) as server: server.port`` — the endpoints above, served by a
    thread per request (``port`` 0: any free port), or on ``bound``, a TCP socket bound already (a lane's: its front
    bound it and keeps its port from the moment it chose it, `rtsearch.serve.lanes`). Raises `OSError` when the
    address cannot be bound."""

    def __init__(self, registry: CollectorRegistry, health: Health, *, port: int, host: str = "127.0.0.1",
                 bound: socket.socket | None = None) -> None:  # fmt: skip
        disable_created_metrics()
        handler = type("Handler", (_Handler,), {"registry": registry, "health": health})
        if bound is None:
            self._server = ThreadingHTTPServer((host, port), handler)
        else:
            self._server = ThreadingHTTPServer(bound.getsockname()[:2], handler, bind_and_activate=False)
            self._server.socket.close()
            self._server.socket = bound
            self._server.server_name, self._server.server_port = bound.getsockname()[:2]
            self._server.server_activate()  # listen
        self._server.daemon_threads = True
        self.port = int(self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    registry: CollectorRegistry
    health: Health

    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        ready, state, failure = self.health.read()
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
            body = encoder(self.registry)
            self._reply(200, gzip.compress(body, 1) if gzipped else body, content_type, gzipped=gzipped)
        elif path == "/healthz":
            self._reply(503 if failure else 200, f"{failure or 'ok'}\n".encode())
        elif path == "/readyz":
            self._reply(200 if ready and not failure else 503, f"{failure or state}\n".encode())
        elif path == "/":
            self._reply(200, b"rtsearch: /metrics /healthz /readyz\n")
        else:
            self._reply(404, b"not found: /metrics /healthz /readyz\n")

    def _reply(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8", *,
               gzipped: bool = False) -> None:  # fmt: skip
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the http.server signature)
        pass  # scrapes every few seconds: not worth a log line each
