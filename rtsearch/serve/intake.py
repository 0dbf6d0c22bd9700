"""Intake: the spectra socket, read and decoded in a process of its own.

Receiving a spectrum (four ZeroMQ frames) and decoding and validating it
(`rtsearch.wire.decode`) is ~15 µs of Python per message: at 20,000 spectra a
second that alone is a third of one core's GIL, which the engine worker and the
publisher in the daemon's process would have to share. So the spectra socket
lives in a child process (`rtsearch.serve.intake_process`) that reads, stamps,
decodes and validates every message and hands the daemon, in arrival order, a
`SpectraChunk` per run of consecutive valid spectra (columns, peaks
concatenated) and a `Received` for each control or malformed message
(`rtsearch.serve.chunks`). The daemon's cost per spectrum is then a few object
constructions. The two talk over a Unix socket pair read from the event loop, and
each sees the other's exit as end of file; a ZeroMQ ``ipc://`` hop wakes slower
(`bench/ipc_rtt.py`: round trip 150 vs 60 µs on the development machine), which
is latency when spectra arrive one at a time.

``sub`` connects a SUB socket to an instrument's PUB (the instrument binds,
any number of listeners); ``pull`` binds a PULL socket for feeds that must not
lose a message (PUSH blocks rather than drops). Usage::

    async with Intake(endpoint, mode="pull") as intake:   # binds (or connects) in the child
        async for items in intake:                         # until `stop` and the child's last items
            ...

`Intake.stop` asks the child to stop reading; whatever it had read still
arrives before the iteration ends, so nothing received is lost.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import multiprocessing
import pickle
import socket
from collections.abc import AsyncIterator
from typing import Any

from rtsearch.config import SpectraMode
from rtsearch.errors import EndpointError
from rtsearch.serve.chunks import CLOSED, ERROR, MESSAGE, READY, SPECTRA, STOP, Received, SpectraChunk, Unpacker

log = logging.getLogger(__name__)

ITEMS_MAX = 64  # chunks and messages the daemon takes per wake-up (then the event loop runs again)
START_TIMEOUT_S = 60.0  # the child imports NumPy and ZeroMQ and binds: seconds on a cold machine
PIPE_BYTES = 4 << 20  # socket buffers: a burst's chunks pass without the child waiting on the daemon

Items = list[SpectraChunk | Received]


class Intake:
    """The spectra socket in its own process; see the module docstring."""

    def __init__(self, endpoint: str, *, mode: SpectraMode = "sub", hwm: int = 0) -> None:
        if mode not in ("sub", "pull"):
            raise ValueError(f"spectra mode must be 'sub' or 'pull', got {mode!r}")
        self.mode = mode
        self.requested = endpoint
        self.endpoint = endpoint  # where it actually listens, once open (``*`` ports resolved)
        self.hwm = hwm
        self.received = 0
        self._sock: socket.socket | None = None
        self._proc: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unpacker = Unpacker()
        self._queue: collections.deque[tuple[int, list[memoryview]]] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False  # the child's end is closed (it exited)
        self._stopping = False
        self._closed = False  # the child said it read its last message

    async def open(self) -> Intake:
        """Start the intake process and wait until its socket is bound or connected.

        Raises `EndpointError` when the endpoint cannot be used (in use, malformed).
        """
        from rtsearch.serve.intake_process import serve

        self._loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        for s in (ours, theirs):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PIPE_BYTES)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, PIPE_BYTES)
        ours.setblocking(False)
        self._sock = ours
        mp = multiprocessing.get_context("spawn")
        self._proc = mp.Process(target=serve, args=(theirs, self.requested, self.mode, self.hwm),
                                name="rtsearch-intake", daemon=True)  # fmt: skip
        try:
            self._proc.start()
        finally:
            theirs.close()  # the child has its own copy: its exit is then our end of file
        self._loop.add_reader(ours.fileno(), self._on_readable)
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                kind, parts = await self._next()
        except TimeoutError:
            await self.aclose()
            raise RuntimeError(f"the intake process did not start within {START_TIMEOUT_S:.0f} s") from None
        except BaseException:
            await self.aclose()
            raise
        if kind != READY:
            await self.aclose()
            reason = bytes(parts[0]).decode() if kind == ERROR and parts else f"unexpected message kind {kind}"
            raise EndpointError(f"spectra endpoint {self.requested} ({self.mode}): {reason}")
        self.endpoint = bytes(parts[0]).decode()
        return self

    async def __aenter__(self) -> Intake:
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _on_readable(self) -> None:
        """The event loop's reader: whatever arrived, unpacked into the queue; wakes the iterator."""
        assert self._sock is not None
        try:
            data = self._sock.recv(PIPE_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self._queue.extend(self._unpacker.feed(data))
        else:
            self._eof = True
            assert self._loop is not None
            self._loop.remove_reader(self._sock.fileno())
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _next(self) -> tuple[int, list[memoryview]]:
        """The child's next message; raises when it exited without saying ``closed``."""
        while not self._queue:
            if self._eof:
                code = self._proc.exitcode if self._proc is not None else None
                raise RuntimeError(f"the intake process exited (exit code {code})")
            assert self._loop is not None
            self._waiter = self._loop.create_future()
            await self._waiter
        return self._queue.popleft()

    @property
    def pid(self) -> int | None:
        """The intake process's id (``None`` before `open` and after `aclose`)."""
        return self._proc.pid if self._proc is not None else None

    def __aiter__(self) -> AsyncIterator[Items]:
        return self._items()

    async def _items(self) -> AsyncIterator[Items]:
        """Everything the child sent since the last wake-up, in order (one await per wake-up)."""
        while not self._closed:
            kind, parts = await self._next()
            items: Items = []
            while True:
                if kind == SPECTRA:
                    chunk = SpectraChunk.from_parts(parts)
                    self.received += len(chunk)
                    items.append(chunk)
                elif kind == MESSAGE:
                    items.append(pickle.loads(parts[0]))
                    self.received += 1
                elif kind == CLOSED:
                    self._closed = True
                    break
                if len(items) >= ITEMS_MAX or not self._queue:
                    break
                kind, parts = self._queue.popleft()
            if items:
                yield items

    def stop(self) -> None:
        """Ask the child to stop reading; the iteration ends after the items it had already read."""
        if self._sock is not None and not self._stopping and not self._eof:
            self._stopping = True
            with contextlib.suppress(OSError):  # never waits; a child that is gone needs no telling
                self._sock.send(STOP)

    async def aclose(self) -> None:
        """Stop the child (it gets a moment to exit on its own) and release everything."""
        if self._proc is not None:
            self.stop()
            for _ in range(100):
                if not self._proc.is_alive():
                    break
                await asyncio.sleep(0.02)
            if self._proc.is_alive():
                self._proc.kill()  # it ignores SIGTERM (see rtsearch.serve.intake_process)
            self._proc.join(5)
            self._proc = None
        if self._sock is not None:
            if not self._eof and self._loop is not None:
                self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
