"""A request/reply pipe between two processes whose large arrays travel through shared memory.

An engine's batch is ~250 kB of peaks at 120 spectra (~13 MB at 4,096). Written through the pipe it took several
blocking writes, each giving up the daemon's GIL and waiting to win it back from a busy event loop and results
thread: at 60,000 spectra/s a lane's engine thread spent 13 % of its wall in those writes and its engine process
7 % reading them (py-spy, docs/history/RESULTS.md 2026-11-29). A `Channel` pickles with protocol 5 (PEP 574), so the
arrays leave the pickle as buffers; it copies them into a region of shared memory (a memfd both processes map)
and sends the pickle's head alone, one short write. The receiver copies each buffer out at once (one memcpy, into
a `bytearray`: writable arrays that nothing else shares), so the sender may write its next message over them.
Messages are the child channel's (`rtsearch.serve.children.framing`)::

    REGION | NEW_REGION: [buffer sizes, u64 each] [pickle head]      (the buffers in the region)
    IN_BAND:            [buffer] * n [pickle head]

A region is the sender's: it grows (a new memfd, passed over the socket with ``SCM_RIGHTS`` right after the
message that first uses it) and is reused. The two ends must take turns — each sends only after it has received
the other's last message (the engine's batch, then its reply) — or a message could be overwritten before it was
read. Objects whose arrays hold less than `REGION_MIN` bytes (a lone spectrum's batch, a reply) go in band, their
buffers parts of the message itself (pickled once).

Pickled, because both ends are the daemon's own: a process and the child it started, over the child's socket pair,
which has no address anyone else could reach (`rtsearch.serve.children.child`); nothing from a network socket comes
this way.

Not `multiprocessing.shared_memory`: its segments are named files in /dev/shm that the process attaching one
registers with its own resource tracker (Python < 3.13), which unlinks them when that process exits, and a daemon
killed outright would leave them behind; a memfd has no name and goes when the last process holding it does.

`ChannelChild` and `serve_channel` are a request/reply child's two ends (the engine, elution and call children).
"""

from __future__ import annotations

import mmap
import os
import pickle
import socket
import struct
import tempfile
from collections.abc import Callable
from multiprocessing.reduction import recvfds, sendfds
from typing import Any, Self

import numpy as np

from rtsearch.serve.children.child import Child, ChildGone, ready
from rtsearch.serve.children.framing import pack, read_message

REGION_MIN = 64 << 10  # array bytes from which they go through the shared region, not the pipe
REGION_FIRST = 4 << 20  # a region's first size (grown to the next power of two a message needs)
ALIGN = 64  # each buffer's offset in the region
IN_BAND, REGION, NEW_REGION = 10, 11, 12  # kinds of message


class Channel:
    """``Channel(sock)``: `send` and `recv` objects over ``sock`` (a blocking Unix stream socket, a `Child`'s),
    taking turns with the other end's Channel; see the module docstring. `close` unmaps the regions and closes
    ``sock``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._out: mmap.mmap | None = None  # the region this end writes
        self._in: mmap.mmap | None = None  # the other end's region, mapped here

    def send(self, obj: Any) -> None:
        """Send ``obj`` (raises `OSError` when the other end is gone)."""
        buffers: list[pickle.PickleBuffer] = []
        head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        views = [b.raw() for b in buffers]
        if sum(v.nbytes for v in views) < REGION_MIN:
            self.sock.sendall(pack(IN_BAND, [*views, head]))
            return
        spans = [_aligned(v.nbytes) for v in views]
        fd = self._grow(sum(spans)) if self._out is None or len(self._out) < sum(spans) else None
        assert self._out is not None
        at = 0
        for view, span in zip(views, spans, strict=True):
            self._out[at : at + view.nbytes] = view
            at += span
        sizes = struct.pack(f"<{len(views)}Q", *(v.nbytes for v in views))
        self.sock.sendall(pack(REGION if fd is None else NEW_REGION, [sizes, head]))
        if fd is not None:
            try:
                sendfds(self.sock, [fd])
            finally:
                os.close(fd)

    def recv(self) -> Any:
        """The next object the other end sent (raises `EOFError` or `OSError` when it is gone)."""
        kind, parts = read_message(self.sock)
        if kind == IN_BAND:  # the parts are views of a writable buffer of the message's own
            return pickle.loads(parts[-1], buffers=parts[:-1])
        if kind == NEW_REGION:
            try:
                fds = recvfds(self.sock, 1)
            except RuntimeError as e:  # no descriptor came with the byte that should carry it
                raise OSError(f"the other end's shared region did not arrive: {e}") from None
            self._map(fds[0])
        if self._in is None:
            raise OSError("a message in a shared region that was never passed")
        sizes = np.frombuffer(parts[0], "<u8").tolist()
        buffers, at = [], 0
        with memoryview(self._in) as region:
            for size in sizes:
                buf = bytearray(size)
                buf[:] = region[at : at + size]
                buffers.append(buf)
                at += _aligned(size)
        return pickle.loads(parts[1], buffers=buffers)

    def close(self) -> None:
        for region in (self._out, self._in):
            if region is not None:
                region.close()
        self._out = self._in = None
        self.sock.close()

    def _grow(self, nbytes: int) -> int:
        """A new region of at least ``nbytes`` for this end to write; its fd, for the other end (the caller
        closes it)."""
        size = max(REGION_FIRST, 1 << (nbytes - 1).bit_length())
        fd = _anonymous_fd()
        try:
            os.ftruncate(fd, size)
            region = mmap.mmap(fd, size)
        except OSError:
            os.close(fd)
            raise
        if self._out is not None:
            self._out.close()
        self._out = region
        return fd

    def _map(self, fd: int) -> None:
        """The other end's new region, mapped here (its old one unmapped)."""
        try:
            region = mmap.mmap(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        if self._in is not None:
            self._in.close()
        self._in = region


def open_channel(child: Child, timeout_s: float) -> Channel:
    """Start ``child`` (a request/reply kind), wait for its handshake (raises `ChildGone`), and the `Channel` to it."""
    child.start().wait_ready(timeout_s)
    assert child.conn is not None
    return Channel(child.conn)


class ChannelChild:
    """A request/reply child (its main runs `serve_channel`): `start` (or ``with``) waits for its handshake, `call`
    sends a request and returns the reply, `close` stops it. A child that cannot start or is lost raises ``gone``
    (an exception class) with ``name`` and why, whatever failed (the socket, the handshake, the process)."""

    def __init__(self, name: str, main: Callable[..., None], *args: Any, gone: type[Exception], timeout_s: float,
                 **options: Any) -> None:  # fmt: skip
        """``options``: the `Child`'s (``fork``, ``nice``)."""
        self.name, self.gone, self.timeout_s = name, gone, timeout_s
        self.child = Child(name, main, *args, **options)
        self._channel: Channel | None = None

    def start(self) -> Self:
        try:
            self._channel = open_channel(self.child, self.timeout_s)
        except (ChildGone, OSError) as e:  # (OSError: it could not be spawned)
            raise self.gone(f"{self.name}: the process could not start: {e}") from None
        return self

    def call(self, request: Any) -> Any:
        """``request`` sent, its reply back (raises ``gone`` when the process is not there)."""
        if self._channel is None:
            raise self.gone(f"{self.name}: not started")
        try:
            self._channel.send(request)
            return self._channel.recv()
        except (EOFError, OSError) as e:
            self.child.join(1.0)
            raise self.gone(f"{self.name}: the process is gone ({self.child.why()}; {type(e).__name__})") from None

    def alive(self) -> bool:
        return self.child.alive()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the process (it ends when its socket closes; killed if it does not within ``timeout_s``)."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self.child.stop(timeout_s)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


def serve_channel(conn: socket.socket, handle: Callable[[Any], Any], payload: bytes = b"", *,
                  unsendable: Callable[[Any, Exception], Any] | None = None) -> None:  # fmt: skip
    """A request/reply child's loop: the handshake (``payload`` with it), then ``handle(request)`` sent back for each
    request, until the parent closes its end or is gone. A reply that does not pickle (nothing of it was written) is
    replaced by ``unsendable(reply, error)`` where given."""
    ready(conn, payload)
    channel = Channel(conn)
    while True:
        try:
            request = channel.recv()
        except (EOFError, OSError):
            return
        reply = handle(request)
        try:
            channel.send(reply)
        except OSError:
            return
        except Exception as e:
            if unsendable is None:
                raise
            channel.send(unsendable(reply, e))


def _aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of `ALIGN`: where the next buffer starts."""
    return -(-nbytes // ALIGN) * ALIGN


def _anonymous_fd() -> int:
    """A file descriptor of memory no path names: a memfd (Linux), else an unlinked temporary file."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("rtsearch-pipe", os.MFD_CLOEXEC)
    with tempfile.TemporaryFile() as f:  # closed here, its duplicate kept
        return os.dup(f.fileno())
