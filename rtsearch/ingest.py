"""Intake: the spectra socket, as an async iterator of decoded messages.

``sub`` connects a SUB socket to an instrument's PUB (the instrument binds,
any number of listeners); ``pull`` binds a PULL socket for feeds that must
not lose a message (PUSH blocks rather than drops). Each wake-up drains
everything already queued without awaiting again, so a burst costs one
event-loop round trip, not one per message. Every message is decoded by
`rtsearch.wire.decode`, which never raises.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import zmq
import zmq.asyncio

from rtsearch.config import SpectraMode
from rtsearch.wire import Message, decode

DRAIN_MAX = 4096  # messages taken per wake-up before yielding to the loop


@dataclass(frozen=True, slots=True)
class Received:
    """A decoded message and when it arrived (wall clock for the wire, monotonic for latency)."""

    message: Message
    wall_ns: int
    mono_ns: int


class Intake:
    """The spectra socket; ``async with Intake(...) as intake: async for chunk in intake: ...``."""

    def __init__(self, ctx: zmq.asyncio.Context, endpoint: str, *, mode: SpectraMode = "sub", hwm: int = 0) -> None:
        if mode not in ("sub", "pull"):
            raise ValueError(f"spectra mode must be 'sub' or 'pull', got {mode!r}")
        self.mode = mode
        self.socket = ctx.socket(zmq.SUB if mode == "sub" else zmq.PULL)
        self.socket.setsockopt(zmq.RCVHWM, hwm)  # 0: unbounded in ZeroMQ; the batcher bounds memory
        self.socket.setsockopt(zmq.LINGER, 0)
        if mode == "sub":
            # everything: a message on an unknown topic is counted as invalid, not filtered unseen
            self.socket.setsockopt(zmq.SUBSCRIBE, b"")
            self.socket.connect(endpoint)
            self.endpoint = endpoint
        else:
            self.socket.bind(endpoint)
            self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        # the same socket without the asyncio wrapper: a burst is drained with plain non-blocking
        # receives (a future per message costs more than decoding it); only the first one is awaited
        self._sync: zmq.Socket[bytes] = zmq.Socket.shadow(self.socket.underlying)
        self.received = 0

    async def __aenter__(self) -> Intake:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if not self.socket.closed:
            self.socket.close(linger=0)

    def __aiter__(self) -> AsyncIterator[list[Received]]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[list[Received]]:
        sock, recv = self.socket, self._sync.recv_multipart
        wall, mono = time.time_ns, time.monotonic_ns
        while True:
            frames = await sock.recv_multipart()
            chunk = [Received(decode(frames), wall(), mono())]
            while len(chunk) < DRAIN_MAX:
                try:
                    frames = recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                chunk.append(Received(decode(frames), wall(), mono()))
            self.received += len(chunk)
            yield chunk
