"""The door: the one spectra socket, fanned out by ZeroMQ's own proxy to several intake processes.

Decoding and validating a spectrum message costs ~15 µs of Python (`rtsearch.serve.intake`): one
intake process tops out well below 100,000 spectra a second. With ``intakes`` > 1 the daemon's
spectra socket (PULL bound, or SUB connected, as configured) is read by `zmq.proxy_steerable` in a
thread of the daemon — C, without the GIL — which pushes each message, whole (multipart messages are
atomic), to one of the intake processes over an ``ipc://`` socket, load-balanced by ZeroMQ::

    senders ──▶ spectra socket ══ proxy (C thread) ══▶ PUSH ipc ──▶ intake 1..K ──▶ daemon

Messages of one sender may then reach the daemon in another order than sent (a ``run.end`` before
the run's last spectra): `rtsearch.serve.runs.RunBook` waits for the ``n_spectra`` the ``run.end``
announced (or, without it, a short grace) before it ends a run. With one intake (the default on small
machines) there is no door: the intake process binds the socket itself, one hop less.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import zmq

from rtsearch.config import SpectraMode
from rtsearch.errors import EndpointError


class Door:
    """The spectra socket and the proxy thread behind it; `inner` is where the intake processes connect."""

    def __init__(self, endpoint: str, *, mode: SpectraMode, hwm: int = 0) -> None:
        self._ctx: zmq.Context[Any] = zmq.Context()
        self._front = self._ctx.socket(zmq.SUB if mode == "sub" else zmq.PULL)
        self._front.setsockopt(zmq.RCVHWM, hwm)
        self._front.setsockopt(zmq.LINGER, 0)
        try:
            if mode == "sub":
                self._front.setsockopt(zmq.SUBSCRIBE, b"")  # everything: unknown topics are counted as invalid
                self._front.connect(endpoint)
                self.endpoint = endpoint
            else:
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
        self._steer_at = f"inproc://door-{id(self)}"
        self._steer = self._ctx.socket(zmq.PAIR)
        self._steer.bind(self._steer_at)
        self._thread = threading.Thread(target=self._forward, name="door", daemon=True)
        self._stopped = False

    def start(self) -> None:
        """Start forwarding (call once the intake processes are connected, so the first messages spread)."""
        self._thread.start()

    def _forward(self) -> None:
        control = self._ctx.socket(zmq.PAIR)
        control.connect(self._steer_at)
        try:
            zmq.proxy_steerable(self._front, self._back, None, control)
        except zmq.ZMQError:
            pass  # terminated, or the context was closed under it
        finally:
            control.close(0)

    def alive(self) -> bool:
        """Whether the proxy forwards (false once stopped, or if it ended on its own)."""
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop forwarding: nothing more is read from the spectra socket (what was pushed stays queued for the
        intake processes, which read it before they close)."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():
            with contextlib.suppress(zmq.ZMQError):
                self._steer.send(b"TERMINATE")
            self._thread.join(5)

    def close(self) -> None:
        """Stop and release the sockets and the ``ipc://`` path."""
        self.stop()
        for s in (self._steer, self._front, self._back):
            s.close(0)
        self._ctx.term()
        with contextlib.suppress(OSError):
            for f in Path(self._dir).iterdir():
                f.unlink()
            os.rmdir(self._dir)
