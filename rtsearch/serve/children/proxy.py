"""ZeroMQ's C proxy in a thread: the daemon's way of moving messages between sockets without its GIL.

Used twice: the door fans the spectra socket out to the intake processes (`rtsearch.serve.intake.door`), and
the results proxy fans every publisher's answers in to the one results PUB (`rtsearch.serve.outputs.publish`).
`Forwarder` runs `zmq.proxy_steerable` between two sockets it is given (the proxy thread then owns
them until stopped) and stops it with ``TERMINATE`` on an ``inproc://`` steering pair.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import zmq

from rtsearch.serve.children.runtime import name_os_thread


class Forwarder:
    """``front`` → ``back`` in a thread (C, no GIL), until `stop`."""

    def __init__(self, ctx: zmq.Context[Any], front: zmq.Socket[Any], back: zmq.Socket[Any], *, name: str) -> None:
        self._ctx, self._front, self._back = ctx, front, back
        self._steer_at = f"inproc://{name}-steer-{id(self)}"
        self._steer = ctx.socket(zmq.PAIR)
        self._steer.bind(self._steer_at)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Forwarder:
        self._thread.start()
        return self

    def _run(self) -> None:
        name_os_thread()
        control = self._ctx.socket(zmq.PAIR)
        control.connect(self._steer_at)
        try:
            zmq.proxy_steerable(self._front, self._back, None, control)
        except zmq.ZMQError:
            pass  # terminated, or the context was closed under it
        finally:
            control.close(0)

    def alive(self) -> bool:
        """Whether it forwards (false once stopped, or if it ended on its own)."""
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop forwarding (the sockets stay open: their owner closes them); idempotent."""
        if self._thread.is_alive():
            with contextlib.suppress(zmq.ZMQError):
                self._steer.send(b"TERMINATE")
            self._thread.join(timeout_s)
        with contextlib.suppress(zmq.ZMQError):
            self._steer.close(0)
