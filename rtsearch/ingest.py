"""Intake: the spectra socket, read and decoded in a process of its own.

Receiving a spectrum (four ZeroMQ frames) and decoding and validating it
(`rtsearch.wire.decode`) is ~15 µs of Python per message: at 20,000 spectra a
second that alone is a third of one core's GIL, which the engine worker and the
publisher in the daemon's process would have to share. So the spectra socket
lives in a child process (`rtsearch.intake_process`) that reads, stamps,
decodes and validates every message and hands the daemon columnar chunks: a
`SpectraChunk` per run of consecutive spectra (header fields as arrays, peaks
concatenated), and a `Received` for each control message or malformed one, in
arrival order. The daemon's cost per spectrum is then a few object
constructions.

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
import contextlib
import logging
import multiprocessing
import pickle
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zmq
import zmq.asyncio

from rtsearch.config import SpectraMode
from rtsearch.errors import EndpointError
from rtsearch.types import Spectrum
from rtsearch.wire import Message, SpectrumMessage

log = logging.getLogger(__name__)

CHUNK_MAX = 512  # messages per hand-over at most: bounds the daemon's lock hold per chunk
FLUSH_S = 0.0005  # a chunk goes at most this long after its first message was read
START_TIMEOUT_S = 60.0  # the child imports NumPy and ZeroMQ and binds: seconds on a cold machine


@dataclass(frozen=True, slots=True)
class Received:
    """A decoded message and when it arrived (wall clock for the wire, monotonic for latency)."""

    message: Message
    wall_ns: int
    mono_ns: int


@dataclass(slots=True)
class SpectraChunk:
    """Consecutive valid spectrum messages, column by column (row ``i`` is the ``i``-th received).

    MS1 spectra keep their header fields but no peaks (the daemon only counts them).
    ``budget_ms`` is NaN where the header gave none; ``mono_ns`` is ``time.monotonic_ns``
    at receipt, comparable across the daemon's processes (one system clock).
    """

    runs: list[str]  # distinct run names; ``run`` indexes this
    run: np.ndarray  # int32
    scan: np.ndarray  # int64
    ms_level: np.ndarray  # int64
    rt: np.ndarray  # float64
    precursor_mz: np.ndarray  # float64
    precursor_intensity: np.ndarray  # float64
    charges: list[tuple[int, ...]]
    sent_ns: np.ndarray  # int64
    budget_ms: np.ndarray  # float64, NaN: the daemon's default
    wall_ns: np.ndarray  # int64
    mono_ns: np.ndarray  # int64
    mz: np.ndarray  # float64, every spectrum's peaks concatenated
    intensity: np.ndarray  # float32
    offsets: np.ndarray  # int64, n + 1: peaks of row i are [offsets[i], offsets[i + 1])

    def __len__(self) -> int:
        return int(self.scan.shape[0])

    def spectra(self, rows: Sequence[int] | np.ndarray) -> list[Spectrum]:
        """`Spectrum` objects of ``rows`` (their peaks are views into this chunk's arrays)."""
        rows = np.asarray(rows, dtype=np.int64)
        runs, mz, inten = self.runs, self.mz, self.intensity
        lo, hi = self.offsets[rows].tolist(), self.offsets[rows + 1].tolist()
        charges = self.charges
        return [
            Spectrum(runs[r], s, lv, mz[a:b], inten[a:b], p, charges[i], t, pi)
            for i, r, s, lv, p, t, pi, a, b in zip(
                rows.tolist(), self.run[rows].tolist(), self.scan[rows].tolist(), self.ms_level[rows].tolist(),
                self.precursor_mz[rows].tolist(), self.rt[rows].tolist(), self.precursor_intensity[rows].tolist(),
                lo, hi, strict=True,
            )
        ]  # fmt: skip


class ChunkBuilder:
    """Collects decoded spectrum messages into one `SpectraChunk` (in the intake process)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._runs: dict[str, int] = {}
        self._rows: list[tuple[Any, ...]] = []
        self._charges: list[tuple[int, ...]] = []
        self._mz: list[np.ndarray] = []
        self._inten: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, msg: SpectrumMessage, wall_ns: int, mono_ns: int) -> None:
        sp = msg.spectrum
        run = self._runs.setdefault(sp.run, len(self._runs))
        budget = msg.budget_ms if msg.budget_ms is not None else np.nan
        self._rows.append((run, sp.scan, sp.ms_level, sp.rt, sp.precursor_mz, sp.precursor_intensity, msg.sent_ns,
                           budget, wall_ns, mono_ns, sp.mz.shape[0] if sp.ms_level >= 2 else 0))  # fmt: skip
        self._charges.append(sp.charges)
        if sp.ms_level >= 2:
            self._mz.append(sp.mz)
            self._inten.append(sp.intensity)

    def build(self) -> SpectraChunk:
        """The chunk of everything added; the builder is empty again."""
        cols = list(zip(*self._rows, strict=True))
        n_peaks = np.asarray(cols[10], dtype=np.int64)
        offsets = np.zeros(len(self._rows) + 1, dtype=np.int64)
        np.cumsum(n_peaks, out=offsets[1:])
        chunk = SpectraChunk(
            runs=list(self._runs), run=np.asarray(cols[0], np.int32), scan=np.asarray(cols[1], np.int64),
            ms_level=np.asarray(cols[2], np.int64), rt=np.asarray(cols[3], np.float64),
            precursor_mz=np.asarray(cols[4], np.float64), precursor_intensity=np.asarray(cols[5], np.float64),
            charges=self._charges, sent_ns=np.asarray(cols[6], np.int64), budget_ms=np.asarray(cols[7], np.float64),
            wall_ns=np.asarray(cols[8], np.int64), mono_ns=np.asarray(cols[9], np.int64),
            mz=np.concatenate(self._mz) if self._mz else np.zeros(0, np.float64),
            intensity=np.concatenate(self._inten) if self._inten else np.zeros(0, np.float32),
            offsets=offsets,
        )  # fmt: skip
        self._reset()
        return chunk


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
        self._ctx: zmq.asyncio.Context | None = None
        self._chan: zmq.asyncio.Socket | None = None
        self._sync: zmq.Socket[bytes] | None = None
        self._dir: str | None = None
        self._proc: Any = None
        self._stopping = False
        self._closed = False  # the child said it read its last message

    async def open(self) -> Intake:
        """Start the intake process and wait until its socket is bound or connected.

        Raises `EndpointError` when the endpoint cannot be used (in use, malformed).
        """
        from rtsearch.intake_process import serve

        self._dir = tempfile.mkdtemp(prefix="rtsearch-intake-")
        address = f"ipc://{Path(self._dir) / 'chunks'}"
        self._ctx = zmq.asyncio.Context()
        self._chan = self._ctx.socket(zmq.PAIR)
        self._chan.setsockopt(zmq.LINGER, 0)
        self._chan.setsockopt(zmq.RCVHWM, 0)  # unbounded: the daemon reads at once; its batcher bounds memory
        self._chan.bind(address)
        self._sync = zmq.Socket.shadow(self._chan.underlying)  # plain non-blocking reads of the same socket
        mp = multiprocessing.get_context("spawn")
        self._proc = mp.Process(target=serve, args=(address, self.requested, self.mode, self.hwm),
                                name="rtsearch-intake", daemon=True)  # fmt: skip
        self._proc.start()
        try:
            reply = await self._next(START_TIMEOUT_S)
        except BaseException:
            await self.aclose()
            raise
        if reply[0] != "ready":
            await self.aclose()
            raise EndpointError(f"spectra endpoint {self.requested} ({self.mode}): {reply[1]}")
        self.endpoint = reply[1]
        return self

    async def __aenter__(self) -> Intake:
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _next(self, timeout: float | None) -> tuple[Any, ...]:
        """The child's next message; raises if it died or said nothing within ``timeout`` seconds."""
        assert self._chan is not None and self._sync is not None
        with contextlib.suppress(zmq.Again):  # already here: no future, no poll (the busy case)
            return pickle.loads(self._sync.recv(zmq.NOBLOCK))
        waited = 0.0
        while True:
            # poll in slices so a dead child is noticed (a PAIR peer's death is silent)
            if await self._chan.poll(1000):
                return pickle.loads(self._sync.recv(zmq.NOBLOCK))
            waited += 1.0
            if not self._proc.is_alive():
                raise RuntimeError(f"the intake process exited (exit code {self._proc.exitcode})")
            if timeout is not None and waited >= timeout:
                raise RuntimeError(f"the intake process did not answer within {timeout:.0f} s")

    def __aiter__(self) -> AsyncIterator[Items]:
        return self._items()

    async def _items(self) -> AsyncIterator[Items]:
        while not self._closed:
            reply = await self._next(None)
            if reply[0] == "items":
                items: Items = reply[1]
                self.received += sum(len(i) if isinstance(i, SpectraChunk) else 1 for i in items)
                yield items
            elif reply[0] == "closed":
                self._closed = True

    def stop(self) -> None:
        """Ask the child to stop reading; the iteration ends after the items it had already read."""
        if self._sync is not None and not self._stopping and self._proc is not None and self._proc.is_alive():
            self._stopping = True
            with contextlib.suppress(zmq.Again):  # never waits: a child that is gone cannot take it
                self._sync.send(b"stop", zmq.NOBLOCK)

    async def aclose(self) -> None:
        """Stop the child (it gets a moment to exit on its own) and release everything."""
        if self._proc is not None:
            with contextlib.suppress(Exception):
                self.stop()
            for _ in range(100):
                if not self._proc.is_alive():
                    break
                await asyncio.sleep(0.02)
            if self._proc.is_alive():
                self._proc.terminate()
            self._proc.join(5)
            self._proc = None
        if self._chan is not None:
            self._chan.close(0)
            self._chan = self._sync = None
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
