"""Host arrays (an index's, memory-mapped) copied to the GPU in one pass by several threads through pinned chunks.

``cupy.asarray`` of a memory-mapped array copies from pageable memory: the driver stages it through its
own small pinned buffer, one page-faulting copy at a time — 1.18 s for the 20,000-protein index's 1.12 GB of
fragments on the H100 machine, half of opening the target (the since-deleted probe `search_phases.py --profile "open
target"`,
docs/history/RESULTS.md). Here ``THREADS`` threads each take every ``THREADS``-th chunk of ``CHUNK_BYTES``: copy it
into one of their two pinned buffers (NumPy's copy releases the GIL) and queue its device copy on their own
stream, so host copies, page faults and transfers of different chunks overlap::

    host (mmap)  | c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7 | ...
    thread 0      c0 -> pinned A0 -> stream 0 ;  c4 -> pinned B0 (A0 still in flight) ...
    thread 1      c1 -> pinned A1 -> stream 1 ;  c5 -> pinned B1 ...
    device       | c0 | c1 | c2 | c3 | c4 | ...   (one array, filled in place)

A target's arrays go through together (`upload_all`): every array's chunks, the largest arrays' first, shared by
the same threads and pinned buffers, where one ``upload`` an array paid its threads' start and pinned buffers again
and the arrays under 64 MB went through ``cupy.asarray`` one after another: the 20,000-protein index's 11 arrays
(1.31 GB) 0.20 s → 0.10-0.11 s on the H200 machine (the since-deleted probe `first_batch_probe.py`,
docs/history/RESULTS.md 2026-11-28).

An array mapped whole from a file (the index's ``.npy`` files) is read from the file into the pinned buffers
(``os.preadv``, the GIL released) instead of copied out of the map: no page fault a page of a map the process never
touched. On the H200 machine the two ways were within each other's spread once the map's pages were faulted in
(the since-deleted probe `upload_probe.py`: 0.045–0.072 s against 0.039–0.062 s for the 1.12 GB;
docs/history/RESULTS.md, 2026-11-28); a
search's map is always new.

Bytes are copied as they are: the device array equals the host one (tests/gpu/test_upload.py).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Literal

import numpy as np

CHUNK_BYTES = 8 << 20
THREADS = 6
Source = Literal["file", "memory"]
Chunk = tuple[int, int, int]  # (array, first byte, end byte)


def chunks_of(sizes: list[int], chunk_bytes: int) -> list[Chunk]:
    """The arrays of ``sizes`` bytes cut into chunks of at most ``chunk_bytes``, largest arrays' first (an array of
    0 bytes has none), so that the threads taking every n-th chunk share each large array's bytes alike."""
    order = sorted(range(len(sizes)), key=lambda k: -sizes[k])
    return [(k, a, min(a + chunk_bytes, sizes[k])) for k in order for a in range(0, sizes[k], chunk_bytes)]


def upload(cp: Any, host: np.ndarray, **options: Any) -> Any:
    """`upload_all` of one array."""
    return upload_all(cp, [host], **options)[0]


def upload_all(cp: Any, hosts: list[np.ndarray], *, threads: int = THREADS, chunk_bytes: int = CHUNK_BYTES,
               source: Source = "file") -> list[Any]:
    """``hosts`` as new CuPy arrays (their bytes copied as they are), in one pass over ``threads`` threads; returns
    once every copy is complete.

    Every array's chunks go through the same threads and pinned buffers, small ones too: a target's dozen arrays
    open in one pass rather than one ``cupy.asarray`` (pageable, page-faulting) after another. ``source``:
    ``"file"`` reads the chunks of an array memory-mapped whole from its file (`file_of`) straight into the pinned
    buffers (``os.preadv``: no page fault a page); ``"memory"`` copies them from the map (or any array)."""
    hosts = [np.ascontiguousarray(h) for h in hosts]
    outs = [cp.empty(h.shape, dtype=h.dtype) for h in hosts]
    srcs = [h.reshape(-1).view(np.uint8) for h in hosts]
    places = [file_of(h) if source == "file" else None for h in hosts]
    fds: dict[str, int] = {}
    try:
        for place in places:
            if place is not None and place[0] not in fds:
                fds[place[0]] = os.open(place[0], os.O_RDONLY)
        chunks = chunks_of([h.nbytes for h in hosts], chunk_bytes)
        n = min(threads, len(chunks))
        longest = max((b - a for _, a, b in chunks), default=0)
        device = cp.cuda.Device().id
        errors: list[BaseException] = []

        def work(k: int) -> None:
            try:
                with cp.cuda.Device(device):
                    stream = cp.cuda.Stream(non_blocking=True)
                    bufs = [cp.cuda.alloc_pinned_memory(longest) for _ in range(2)]
                    views = [np.frombuffer(b, dtype=np.uint8, count=longest) for b in bufs]
                    done: list[Any] = [None, None]
                    for j, (i, a, b) in enumerate(chunks[k::n]):
                        slot = j % 2
                        if done[slot] is not None:
                            done[slot].synchronize()  # that buffer's previous chunk has reached the device
                        place = places[i]
                        if place is not None:
                            _read_into(fds[place[0]], views[slot][: b - a], place[1] + a)
                        else:
                            np.copyto(views[slot][: b - a], srcs[i][a:b])
                        cp.cuda.runtime.memcpyAsync(outs[i].data.ptr + a, bufs[slot].ptr, b - a,
                                                    cp.cuda.runtime.memcpyHostToDevice, stream.ptr)  # fmt: skip
                        done[slot] = stream.record()
                    stream.synchronize()
            except BaseException as exc:  # raised in the calling thread below
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(k,), name=f"upload-{k}", daemon=True) for k in range(n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        for fd in fds.values():
            os.close(fd)
    if errors:
        raise errors[0]
    return outs


def file_of(a: np.ndarray) -> tuple[str, int] | None:
    """(file, byte offset of ``a``'s first element) when ``a`` is a contiguous view of a read-only file map
    (`numpy.load`'s ``mmap_mode="r"``, as `rtsearch.database.store.map_arrays` opens arrays), else ``None``."""
    m: np.ndarray | None = a
    while m is not None and not isinstance(m, np.memmap):
        m = m.base if isinstance(m.base, np.ndarray) else None
    if m is None or not getattr(m, "filename", None) or m.mode != "r" or not m.flags.c_contiguous:
        return None
    start = a.__array_interface__["data"][0] - m.__array_interface__["data"][0]
    if not a.flags.c_contiguous or start < 0 or start + a.nbytes > m.nbytes:
        return None
    return str(m.filename), int(m.offset) + start


def _read_into(fd: int, view: np.ndarray, offset: int) -> None:
    """``view``'s bytes read from ``fd`` at ``offset`` (the GIL released while the kernel copies)."""
    done = 0
    while done < view.nbytes:
        got = os.preadv(fd, [memoryview(view[done:])], offset + done)  # type: ignore[arg-type]
        if got <= 0:
            raise OSError(f"short read at byte {offset + done} of an index file")
        done += got
