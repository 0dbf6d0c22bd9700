"""The door: the one spectra socket, fanned out by ZeroMQ's own proxy to several intake processes.

Decoding and validating a spectrum message costs ~15 µs of Python (`rtsearch.serve.intake.intake`): one
intake process tops out well below 100,000 spectra a second. With ``intakes`` > 1 the daemon's
spectra socket (PULL bound, or SUB connected, as configured) is read by `zmq.proxy_steerable` in a
thread of the daemon — C, without the GIL — which pushes each message, whole (multipart messages are
atomic), to one of the intake processes over an ``ipc://`` socket, load-balanced by ZeroMQ::

    senders ──▶ spectra socket ══ proxy (C thread) ══▶ PUSH ipc ──▶ intake 1..K ──▶ daemon

Messages of one sender may then reach the daemon in another order than sent (a ``run.end`` before
the run's last spectra): `rtsearch.serve.runs.runs.RunBook` waits for the ``n_spectra`` the ``run.end``
announced (or, without it, a short grace) before it ends a run. With one intake (the default on small
machines) there is no door: the intake process binds the socket itself, one hop less.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import zmq

from rtsearch.config import SpectraMode
from rtsearch.errors import EndpointError
from rtsearch.protocol.wire import MAX_MESSAGE_BYTES
from rtsearch.serve.children.proxy import Forwarder


def default_intakes(cpus: int | None = None) -> int:
    """Intake processes when ``intakes`` = 0: one per 4 cores, at most 4 (measured on 16 cores: 4 answered
    120,000 offered spectra/s, 2 about 85,000, 1 about 25,000; docs/history/RESULTS.md)."""
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    return max(1, min(4, cpus // 4))


class Door:
    """The spectra socket and the proxy thread behind it; `inner` is where the intake processes connect."""

    def __init__(self, endpoint: str, *, mode: SpectraMode, hwm: int = 0, io_threads: int = 1) -> None:
        """``io_threads``: ZeroMQ's I/O threads for the two sockets and their connections (the lanes' front, which
        carries every spectrum of every lane, gives it two)."""
        self._ctx: zmq.Context[Any] = zmq.Context(io_threads=io_threads)
        self._front = self._ctx.socket(zmq.SUB if mode == "sub" else zmq.PULL)
        self._front.setsockopt(zmq.RCVHWM, hwm)
        self._front.setsockopt(zmq.LINGER, 0)
        try:
            if mode == "sub":
                self._front.setsockopt(zmq.SUBSCRIBE, b"")  # everything: unknown topics are counted as invalid
                self._front.connect(endpoint)
                self.endpoint = endpoint
            else:  # bound: a peer's frame over the bound drops its connection unread (it reconnects); not when we
                # connect (sub): ZeroMQ would not connect again, and the instrument we chose is trusted that far
                self._front.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
                self._front.bind(endpoint)
                self.endpoint = self._front.getsockopt_string(zmq.LAST_ENDPOINT)
        except zmq.ZMQError as e:
            self._front.close(0)
            self._ctx.term()
            raise EndpointError(f"spectra endpoint {endpoint} ({mode}): {e}") from None
        self._dir = tempfile.mkdtemp(prefix="rtsearch-door-")
        self.inner = f"ipc://{Path(self._dir) / 'spectra'}"
        self._back = self._ctx.socket(zmq.PUSH)
        self._back.setsockopt(zmq.SNDHWM, 0)  # never drop, never block the proxy: memory is the batcher's to bound
        self._back.setsockopt(zmq.LINGER, 0)
        self._back.bind(self.inner)
        self._forwarder = Forwarder(self._ctx, self._front, self._back, name="door")
        self._stopped = False

    def start(self) -> None:
        """Start forwarding (call once the intake processes are connected, so the first messages spread)."""
        self._forwarder.start()

    def alive(self) -> bool:
        """Whether the proxy forwards (false once stopped, or if it ended on its own)."""
        return self._forwarder.alive()

    def stop(self) -> None:
        """Stop forwarding: nothing more is read from the spectra socket (what was pushed stays queued for the
        intake processes, which read it before they close)."""
        if not self._stopped:
            self._stopped = True
            self._forwarder.stop()

    def close(self) -> None:
        """Stop and release the sockets and the ``ipc://`` path."""
        self.stop()
        for s in (self._front, self._back):
            s.close(0)
        self._ctx.term()
        shutil.rmtree(self._dir, ignore_errors=True)
