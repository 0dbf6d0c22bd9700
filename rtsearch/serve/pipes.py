"""Objects over a `multiprocessing` pipe with their arrays out of band: no copy into or out of a pickle.

`pickle.dumps` of a batch copies every array into one bytes object, and `pickle.loads` copies each back out:
for the 4,096 spectra of a bulk batch (~13 MB of peaks) that is two copies of 13 MB in each process on top of
the pipe's own. With pickle protocol 5 (PEP 574) the arrays leave the pickle as buffers: `send_object` sends
the pickle's head (with the buffers' sizes) and then each buffer as it is, and `recv_object` reads each into
a `bytearray` of its size (one copy, from the kernel; the arrays are writable views of it). Small objects (a
lone spectrum's batch) go in band, in one message::

    [u32 n][u64 size] * n [pickle head]   then n messages, one buffer each
"""

from __future__ import annotations

import pickle
import struct
from multiprocessing.connection import Connection
from typing import Any

_COUNT = struct.Struct("<I")
OUT_OF_BAND_MIN = 256 << 10  # array bytes from which they travel out of band (`send_object`)


def send_object(conn: Connection, obj: Any) -> None:
    """Send ``obj`` (raises what `Connection.send_bytes` raises: the other end is gone). Its arrays go out of band
    only when they hold `OUT_OF_BAND_MIN` bytes or more: a message a buffer costs the receiver a wake-up each,
    more than copying a few kB (a lone spectrum's batch has ~10 arrays)."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    views = [b.raw() for b in buffers]
    if sum(v.nbytes for v in views) < OUT_OF_BAND_MIN:
        views, head = [], pickle.dumps(obj, protocol=5)
    sizes = struct.pack(f"<{len(views)}Q", *(v.nbytes for v in views))
    conn.send_bytes(_COUNT.pack(len(views)) + sizes + head)
    for view in views:
        conn.send_bytes(view)


def recv_object(conn: Connection) -> Any:
    """The next object `send_object` sent (raises `EOFError` or `OSError` when the other end is gone)."""
    first = conn.recv_bytes()
    (n,) = _COUNT.unpack_from(first)
    sizes = struct.unpack_from(f"<{n}Q", first, _COUNT.size)
    buffers = []
    for size in sizes:
        buf = bytearray(size)
        if size:
            conn.recv_bytes_into(buf)
        else:
            conn.recv_bytes()
        buffers.append(buf)
    return pickle.loads(memoryview(first)[_COUNT.size + 8 * n :], buffers=buffers)
