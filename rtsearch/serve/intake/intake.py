"""Intake: the spectra socket, read and decoded in a process of its own.

Receiving a spectrum (four ZeroMQ frames) and decoding and validating it
(`rtsearch.protocol.wire.decode`) is ~15 µs of Python per message: at 20,000 spectra a
second that alone is a third of one core's GIL, which the engine worker and the
publisher in the daemon's process would have to share. So the spectra socket
lives in a child process (`rtsearch.serve.intake.intake_process`) that reads, stamps,
decodes and validates every message and hands the daemon, in arrival order, a
`SpectraChunk` per run of consecutive valid spectra (columns, peaks
concatenated) and a `Received` for each control or malformed message
(`rtsearch.serve.intake.chunks`). The daemon's cost per spectrum is then a few object
constructions. The two talk over a Unix socket pair read from the event loop, and
each sees the other's exit as end of file; a ZeroMQ ``ipc://`` hop wakes slower
(the since-deleted probe `ipc_rtt.py`: round trip 150 vs 60 µs on the development machine), which
is latency when spectra arrive one at a time.

``sub`` connects a SUB socket to an instrument's PUB (the instrument binds,
any number of listeners); ``pull`` binds a PULL socket for feeds that must not
lose a message (PUSH blocks rather than drops). Usage::

    async with Intake(endpoint, mode="pull") as intake:   # binds (or connects) in the child
        async for items in intake:                         # until `stop` and the child's last items
            ...

`Intake.stop` asks the child to stop reading; whatever it had read, and what its socket still
held, arrives before the iteration ends, so nothing received is lost.

``intakes`` > 1 starts that many intake processes behind a `rtsearch.serve.intake.door.Door` (ZeroMQ's C
proxy on the spectra socket): decoding then runs on as many cores. Their items interleave chunk by
chunk; each process keeps its own messages in order.

A lane of the lanes' front (`rtsearch.serve.lanes`, a `Lane`) starts none: the front's intake processes hand it
its runs' items over the socket pairs it was given, and the front, not the lane, stops them (`stop` does nothing).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import pickle
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtsearch.cluster.share import Share
from rtsearch.config import SpectraMode
from rtsearch.errors import EndpointError
from rtsearch.serve.children.child import Child, ChildGone
from rtsearch.serve.children.framing import Unpacker
from rtsearch.serve.engine.admission import Advice
from rtsearch.serve.intake.chunks import (
    CLOSED,
    INT_COLUMNS,
    MESSAGE,
    SHED,
    SPECTRA,
    Received,
    ShedChunk,
    SpectraChunk,
    ack_message,
    stop_message,
)  # fmt: skip
from rtsearch.serve.intake.door import Door
from rtsearch.serve.intake.intake_process import Shedding, serve

log = logging.getLogger(__name__)

ITEMS_MAX = 64  # chunks and messages the daemon takes per wake-up (then the event loop runs again)
START_TIMEOUT_S = 60.0  # the child imports NumPy and ZeroMQ and binds: seconds on a cold machine
EXIT_WAIT_S = 5  # closing: how long an intake process may take to publish what it was told is journaled, and exit
PIPE_BYTES = 4 << 20  # socket buffers: a burst's chunks pass without the child waiting on the daemon
# a read this large hands its buffer on (copying it out cost the daemon's event loop ~9 MB of copies a 4 MB read
# with the joins, docs/history/RESULTS.md 2026-11-29); a smaller one is copied out of the buffer, which is kept
HANDOVER_BYTES = 256 << 10

Items = list[SpectraChunk | Received | ShedChunk]
_MONO = INT_COLUMNS.index("mono_ns")


@dataclass(frozen=True)
class Lane:
    """This daemon is lane ``index`` of the lanes' front (`rtsearch.serve.lanes`): ``pipes``, its ends of the socket
    pairs with the front's intake processes; ``advice``, its `Advice` words shared with them; ``results``, where
    they send the answers they give at its door (its publisher's ``inner``); ``device``, the GPU it scores on;
    ``share``, where the lanes share a cluster's workers (`rtsearch.cluster.share`); ``metrics``, where it serves
    its /metrics."""

    index: int
    pipes: list[socket.socket]
    advice: Any
    results: str
    device: str = ""  # its CUDA_VISIBLE_DEVICES (`rtsearch.serve.children.runtime.gpu_of`); "": as inherited
    share: Share | None = None
    metrics: socket.socket | None = None  # its /metrics socket, bound by the front (which knows the port from then on)
    link: socket.socket | None = None  # its child channel with the front: told when the lane is ready


class _Child:
    """One intake process (``proc`` None: one of the lanes' front's) and the daemon's end of its socket pair."""

    def __init__(self, proc: Child | None, sock: socket.socket, index: int) -> None:
        self.proc = proc
        self.sock = sock
        self.unpacker = Unpacker()
        self.buffer = np.empty(PIPE_BYTES, np.uint8)  # read into, then copied out or handed on whole
        self.eof = False  # its end is closed (it exited)
        self.closed = False  # it said it read its last message
        self.stopping = False
        self.index = index  # its slot in `Advice`
        self.items = 0  # chunks and messages it handed over
        self.outbox = b""  # what could not be written to it yet (its socket's buffer was full)


class Intake:
    """The spectra socket read by intake processes; see the module docstring."""

    def __init__(
        self, endpoint: str, *, mode: SpectraMode = "sub", hwm: int = 0, intakes: int = 1,
        shedding: Shedding | None = None, keep_ms1: bool = False, lane: Lane | None = None,
    ) -> None:  # fmt: skip
        if mode not in ("sub", "pull"):
            raise ValueError(f"spectra mode must be 'sub' or 'pull', got {mode!r}")
        if intakes < 1:
            raise ValueError(f"intakes must be >= 1, got {intakes}")
        self.mode = mode
        self.requested = endpoint
        self.endpoint = endpoint  # where it actually listens, once open (``*`` ports resolved)
        self.hwm = hwm
        self.intakes = intakes
        self.shedding = shedding  # answering at the door (`rtsearch.serve.engine.admission`); None: never
        self.keep_ms1 = keep_ms1  # MS1 spectra keep their peaks (elution events)
        self.lane = lane  # a lane's intake: the front's processes, attached (see the module docstring)
        self.received = 0
        self.door: Door | None = None
        self._children: list[_Child] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: collections.deque[tuple[int, list[memoryview], int]] = collections.deque()  # kind, parts, child
        self._advice = Advice(shedding.advice) if shedding is not None else None
        self._waiter: asyncio.Future[None] | None = None

    async def open(self) -> Intake:
        """Start the intake process(es) (and the door) and wait until they listen.

        Raises `EndpointError` when the endpoint cannot be used (in use, malformed).
        """

        self._loop = asyncio.get_running_loop()
        if self.lane is not None:
            for k, sock in enumerate(self.lane.pipes):
                sock.setblocking(False)
                self._children.append(child := _Child(None, sock, k))
                self._loop.add_reader(sock.fileno(), self._on_readable, child)
            return self
        where, mode = self.requested, str(self.mode)
        if self.intakes > 1:
            self.door = Door(self.requested, mode=self.mode, hwm=self.hwm)  # raises EndpointError
            where, mode = self.door.inner, "door"
        procs = [Child(f"intake-{k}", serve, None, where, mode, self.hwm, self.intakes, self.shedding, k, self.keep_ms1,
                       fork=True, buffer_bytes=PIPE_BYTES) for k in range(self.intakes)]  # fmt: skip
        try:
            for k, proc in enumerate(procs):
                self._children.append(_Child(proc.start(), proc.conn, k))  # type: ignore[arg-type]
            for child in self._children:
                assert child.proc is not None
                try:
                    said = await asyncio.to_thread(child.proc.wait_ready, START_TIMEOUT_S)
                except ChildGone as e:
                    raise EndpointError(f"spectra endpoint {self.requested} ({self.mode}): {e}") from None
                if self.door is None:
                    self.endpoint = said.decode()
                child.sock.setblocking(False)
                self._loop.add_reader(child.sock.fileno(), self._on_readable, child)
        except BaseException:
            await self.aclose()
            raise
        if self.door is not None:
            self.endpoint = self.door.endpoint
            self.door.start()
        return self

    async def __aenter__(self) -> Intake:
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _on_readable(self, child: _Child) -> None:
        """The event loop's reader: whatever arrived, unpacked into the queue; wakes the iterator."""
        try:
            messages = self._read(child)
        except (BlockingIOError, InterruptedError):
            return
        if messages is None:
            child.eof = True
            assert self._loop is not None
            self._loop.remove_reader(child.sock.fileno())
        for kind, parts in messages or ():
            if kind == CLOSED:
                child.closed = True
                if not all(c.closed for c in self._children):
                    continue  # the others still hand over what they read
            child.items += kind in (SPECTRA, MESSAGE, SHED)
            self._queue.append((kind, parts, child.index))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    @staticmethod
    def _read(child: _Child) -> list[tuple[int, list[memoryview]]] | None:
        """One read of ``child``'s socket and the messages it completes (``None``: its end is closed). A large
        message is read into a buffer of its own, a large read's buffer handed on with its messages (views of it):
        the copies of ~9 MB a 4 MB read that the event loop made (docs/history/RESULTS.md 2026-11-29) are gone."""
        try:
            into = child.unpacker.reserve(HANDOVER_BYTES)
            if into is not None:
                n = child.sock.recv_into(into)
                return child.unpacker.filled(n) if n else None
            n = child.sock.recv_into(child.buffer.data)  # whatever waits, up to 4 MB: one wake-up drains a burst
        except (BlockingIOError, InterruptedError):
            raise
        except OSError:
            return None
        if not n:
            return None
        if n >= HANDOVER_BYTES:  # the buffer itself handed on (the messages are views of it), a new one read into
            data: bytes | memoryview = child.buffer.data[:n]
            child.buffer = np.empty(PIPE_BYTES, np.uint8)
        else:
            data = bytes(child.buffer.data[:n])
        return child.unpacker.feed(data)

    async def _next(self) -> tuple[int, list[memoryview], int]:
        """The children's next message; raises when one exited without saying ``closed``."""
        while not self._queue:
            for child in self._children:
                if child.eof and not child.closed:
                    if child.proc is None:
                        raise RuntimeError(f"intake process {child.index} of the lanes' front exited")
                    raise RuntimeError(f"the intake process {child.proc.name} exited ({child.proc.why()})")
            assert self._loop is not None
            self._waiter = self._loop.create_future()
            await self._waiter
        return self._queue.popleft()

    @property
    def pid(self) -> int | None:
        """The (first) intake process's id (``None`` before `open` and after `aclose`)."""
        return self._children[0].proc.pid if self._children and self._children[0].proc else None

    @property
    def pids(self) -> list[int]:
        """Every intake process's id."""
        return [c.proc.pid for c in self._children if c.proc is not None and c.proc.pid is not None]

    @property
    def items_by_process(self) -> list[int]:
        """Chunks and messages each intake process handed over so far (how the door spreads the load)."""
        return [c.items for c in self._children]

    def alive(self) -> bool:
        """Whether every intake process runs and the door (if any) forwards."""
        return all(c.proc.alive() if c.proc is not None else c.closed or not c.eof for c in self._children) and (
            self.door is None or self.door.alive())  # fmt: skip

    def __aiter__(self) -> AsyncIterator[Items]:
        return self._items()

    async def _items(self) -> AsyncIterator[Items]:
        """Everything the children sent since the last wake-up, in order (one await per wake-up).

        Once the daemon asks for more, what it was given counts as processed: each child learns (`Advice`) how
        far the daemon got in its pipe, and so how long a spectrum it sends now waits there.
        """
        closed = False
        while not closed:
            kind, parts, k = await self._next()
            items: Items = []
            newest: dict[int, int] = {}
            while True:
                if kind == SPECTRA:
                    chunk = SpectraChunk.from_parts(parts)
                    self.received += len(chunk)
                    items.append(chunk)
                    newest[k] = max(newest.get(k, 0), int(chunk.ints[-1, _MONO]))
                elif kind == MESSAGE:
                    rec = pickle.loads(parts[0])  # pickled by our own intake process, over its socket pair
                    items.append(rec)
                    self.received += 1
                    newest[k] = max(newest.get(k, 0), rec.mono_ns)
                elif kind == SHED:
                    shed = ShedChunk.from_parts(parts, k)
                    self.received += len(shed.chunk)
                    items.append(shed)
                    newest[k] = max(newest.get(k, 0), int(shed.chunk.ints[:, _MONO].max()))
                elif kind == CLOSED:
                    closed = True
                    break
                if len(items) >= ITEMS_MAX or not self._queue:
                    break
                kind, parts, k = self._queue.popleft()
            if items:
                yield items
            if self._advice is not None:
                for child, mono in newest.items():
                    self._advice.processed(child, mono)

    def ack(self, child: int, seq: int) -> None:
        """Tell intake process ``child`` that its shed report ``seq`` is journaled (it publishes those answers now).
        Never waits: what its socket cannot take now is written when it can (the event loop's writer)."""
        self._write(self._children[child], ack_message(seq))

    def _write(self, child: _Child, data: bytes) -> None:
        if child.eof or child.sock.fileno() < 0:
            return  # gone: it published nothing it was not told to
        pending = not child.outbox
        child.outbox += data
        if pending:
            self._flush(child)

    def _flush(self, child: _Child) -> None:
        """Write what waits for ``child`` (the event loop's writer while its socket is full)."""
        assert self._loop is not None
        try:
            sent = child.sock.send(child.outbox)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:  # gone
            sent, child.outbox = 0, b""
        child.outbox = child.outbox[sent:]
        if child.outbox:
            self._loop.add_writer(child.sock.fileno(), self._flush, child)
        else:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_writer(child.sock.fileno())

    def stop(self) -> None:
        """Stop reading the spectra socket; the iteration ends after what the children read and still held (a lane:
        nothing to do, its front stops the intake processes)."""
        if self.lane is not None:
            return
        if self.door is not None:
            self.door.stop()  # nothing more comes in; what it pushed stays queued for the children
        for child in self._children:
            if not child.stopping and not child.eof:
                child.stopping = True
                self._write(child, stop_message())  # never waits; a child that is gone needs no telling

    async def aclose(self) -> None:
        """Stop the children (they get a moment to exit on their own) and release everything."""
        self.stop()
        for child in self._children:
            if child.sock.fileno() < 0:
                continue  # closed already
            # it publishes the shed answers it was told are journaled, then exits; a lane's (the front's, serving
            # every lane) closes its end once every lane acknowledged what it reported
            for _ in range(EXIT_WAIT_S * 50):
                if (child.proc is not None and not child.proc.alive()) or (child.proc is None and child.eof):
                    break
                await asyncio.sleep(0.02)
            if self._loop is not None:
                with contextlib.suppress(ValueError, OSError):
                    self._loop.remove_reader(child.sock.fileno())
                if child.outbox:
                    self._loop.remove_writer(child.sock.fileno())
            if child.proc is not None:
                child.proc.stop(0.0)  # killed if still there (it ignores SIGTERM, rtsearch.serve.intake.intake_process)
            child.sock.close()
        if self.door is not None:
            self.door.close()
            self.door = None
