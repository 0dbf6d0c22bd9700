"""The byte stream between the daemon and its child processes (intake, publisher, lanes): length-prefixed
messages over a Unix socket pair (`pack` writes one, `Unpacker` reads them out of reads of any size)::

    u64 length of what follows | u8 kind | 3 pad | u32 number of parts | u64 length of each part | the parts

Each part starts 8-byte aligned from the message's start and every message is a multiple of 8 long, so a part read
into an aligned buffer holds aligned arrays.

A message's parts come out as views of the bytes they arrived in: a large message is read into a buffer of its own
(`Unpacker.reserve`), a message begun in one read is joined once with the read that completes it, and nothing else is
copied (the daemon's event loop copied ~9 MB a 4 MB read before: docs/history/RESULTS.md 2026-11-29).
"""

from __future__ import annotations

import pickle
import socket
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

_HEAD = struct.Struct("<QBxxxI")  # length of the rest, kind, number of parts
_PAD = bytes(7)


def pack(kind: int, parts: Sequence[bytes | memoryview | pickle.PickleBuffer] = ()) -> bytes:
    """One message of ``kind`` holding ``parts`` (see the module docstring)."""
    lens = [memoryview(p).nbytes for p in parts]  # (struct, not a NumPy array: a lone spectrum's chunk is a few µs)
    pieces: list[Any] = [None, struct.pack(f"<{len(lens)}Q", *lens)]
    for part, n in zip(parts, lens, strict=True):
        pieces.append(part)
        if n % 8:
            pieces.append(_PAD[: 8 - n % 8])
    pieces[0] = _HEAD.pack(8 + 8 * len(lens) + sum(_aligned(n) for n in lens), kind, len(lens))
    return b"".join(pieces)


def _aligned(n: int) -> int:
    return (n + 7) & ~7


READ_BYTES = 64 << 10  # `Unpacker.wanted`: a read asks for this much unless a message begun needs more


class Unpacker:
    """Messages out of a byte stream fed in arbitrary pieces (`feed` returns the complete ones).

    A message's parts are views of the bytes it arrived in (or, when it spanned reads, of those reads joined
    once): no copy a message, none a part."""

    def __init__(self) -> None:
        self._pieces: list[bytes | memoryview] = []  # what came and is not a whole message yet
        self._have = 0  # their bytes
        self._need = 8  # bytes needed before a message can be complete (its length word, or it whole)
        self._whole: np.ndarray | None = None  # a large message's own buffer, read into (`reserve`)

    def wanted(self, most: int) -> int:
        """How many bytes a blocking reader asks the next read for: what the message begun needs to be whole (at
        most ``most``), at least `READ_BYTES`. A read's buffer is allocated at the size asked (a 4 MB ``recv`` of a
        2 kB message cost 15 µs more than a 64 kB one on the development machine)."""
        return min(most, max(READ_BYTES, self._need - self._have))

    def reserve(self, least: int) -> memoryview | None:
        """Where the next read goes when the message begun still misses ``least`` bytes or more: the rest of a
        buffer of that message's size (what came of it copied in once), so that reads complete it in place (then
        `filled`); ``None``: read anywhere and `feed` it."""
        missing = self._need - self._have
        if not self._pieces or self._need == 8 or missing < least:
            return None
        if self._whole is None:
            self._whole = np.empty(self._need, np.uint8)
            at = 0
            for piece in self._pieces:
                self._whole[at : at + len(piece)] = np.frombuffer(piece, np.uint8)
                at += len(piece)
            self._pieces = [self._whole.data[:at]]
        return self._whole.data[self._have :]

    def filled(self, n: int) -> list[tuple[int, list[memoryview]]]:
        """``n`` bytes were read into `reserve`'s buffer: the message, once they complete it."""
        assert self._whole is not None
        self._have += n
        if self._have < self._need:
            self._pieces = [self._whole.data[: self._have]]
            return []
        whole, self._whole = self._whole.data, None
        self._pieces, self._have, self._need = [], 0, 8
        return [_message(whole[8:])]

    def feed(self, data: bytes | memoryview) -> list[tuple[int, list[memoryview]]]:
        """The messages ``data`` completes, each ``(kind, parts)``; the parts are views of ``data`` (or of the bytes
        a message begun in earlier reads was joined into: only that message's, not the whole read's)."""
        view = memoryview(data)
        out: list[tuple[int, list[memoryview]]] = []
        while self._pieces:  # a message begun in earlier reads: its own bytes joined once it is whole
            missing = self._need - self._have
            if len(view) < missing:
                self._pieces.append(view)
                self._have += len(view)
                return out
            whole = memoryview(b"".join([*self._pieces, view[:missing]]))
            view, self._whole = view[missing:], None
            if self._need == 8:  # only its length word: now its size is known
                (rest,) = struct.unpack_from("<Q", whole)
                self._pieces, self._have, self._need = [whole], 8, 8 + rest
                continue
            self._pieces, self._have, self._need = [], 0, 8
            out.append(_message(whole[8:]))
        pos, end = 0, len(view)
        while end - pos >= 8:
            (rest,) = struct.unpack_from("<Q", view, pos)
            if end - pos - 8 < rest:
                break
            out.append(_message(view[pos + 8 : pos + 8 + rest]))
            pos += 8 + rest
        if pos < end:  # the start of the next message, kept as a view until the reads that complete it
            self._pieces, self._have = [view[pos:]], end - pos
            self._need = 8 + struct.unpack_from("<Q", view, pos)[0] if end - pos >= 8 else 8
        return out


def read_message(sock: socket.socket) -> tuple[int, list[memoryview]]:
    """One whole message from a blocking socket, read exactly (what follows it stays in the socket: the handshake of
    `rtsearch.serve.children.child`, a `rtsearch.serve.children.pipes.Channel`'s descriptors); its parts are views
    of a writable buffer of its own. Raises `EOFError` when the other end closed."""
    rest = struct.unpack("<Q", _exactly(sock, bytearray(8)))[0]
    return _message(memoryview(_exactly(sock, bytearray(rest))))


def _exactly(sock: socket.socket, buf: bytearray) -> bytearray:
    view, got = memoryview(buf), 0
    while got < len(buf):
        n = sock.recv_into(view[got:])
        if not n:
            raise EOFError("the other end closed")
        got += n
    return buf


def _message(msg: memoryview) -> tuple[int, list[memoryview]]:
    """A message's kind and parts (views of ``msg``), its length word taken off."""
    kind, n = msg[0], struct.unpack_from("<I", msg, 4)[0]
    lens = np.frombuffer(msg, dtype="<u8", count=n, offset=8).tolist()
    at = 8 + 8 * n
    parts = []
    for k in lens:
        parts.append(msg[at : at + k])
        at += _aligned(k)
    return kind, parts
