"""The intake process's reader: the spectra socket read in chunks sized by the arrival rate, every message decoded.

Used by `rtsearch.serve.intake.intake_process` (one a process, behind a lone daemon or the lanes' front).
"""

from __future__ import annotations

import collections
import time

import zmq

from rtsearch.config.environment import tuning
from rtsearch.protocol.batch import SPECTRA as SPECTRA_TOPIC
from rtsearch.protocol.batch import SpectraBlock, decode_spectra
from rtsearch.protocol.wire import RawSpectrum, RunEnd, decode
from rtsearch.serve.intake.chunks import CHUNK_MAX, ChunkBuilder, Received, SpectraChunk, block_items
from rtsearch.serve.intake.routing import LaneOf

FLUSH_S = 0.001  # a chunk goes at most this long after its first message was read (knob ``intake_flush_ms``)
# behind the lanes' front each read is cut into a chunk a lane, each smaller by the lanes: twice the wait (four lanes
# on one H200, six daemons with 1 ms and five with 2 ms in three calls: median p99 at 80,000 /s 96.8 -> 67.2 ms, at
# 100,000 /s 514 -> 123 ms, at 60,000 /s 53.6 -> 53.2, 20,000-40,000 /s within the spread; docs/history/RESULTS.md
# 2026-11-29)
LANES_FLUSH_S = 0.002
COALESCE_HZ = 4000.0  # above this arrival rate a chunk waits (up to FLUSH_S) for more messages
RATE_WINDOW = 32  # arrivals the rate is measured over

_EVENTS, _POLLIN, _NOBLOCK = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.NOBLOCK)  # plain ints: no enum per call


class Reader:
    """Reads the spectra socket in chunks, sized by the arrival rate.

    A chunk costs the same few dozen NumPy calls here and in the daemon whether it holds
    one spectrum or hundreds. At a few hundred spectra a second each spectrum goes alone,
    at once (its latency is what counts); above `COALESCE_HZ` a chunk that found the socket
    empty waits up to `FLUSH_S` from its first message for more, so at 20,000 a second
    chunks hold ~20 spectra instead of one or two, for at most a millisecond of latency.

    Behind the door each of ``share`` processes sees ``1/share`` of the arrivals: it coalesces above
    ``COALESCE_HZ / share`` and waits up to ``FLUSH_S * share``, so the daemon gets as many chunks a
    second, each as large, as from one intake process — its cost is per chunk, not per spectrum. Behind the lanes'
    front, where each read is cut into a chunk a lane, it waits up to ``LANES_FLUSH_S * share``.
    """

    def __init__(self, sock: zmq.Socket[bytes], *, share: int = 1, keep_ms1: bool = False,
                 lanes: LaneOf | None = None, n_lanes: int = 1) -> None:  # fmt: skip
        """``lanes`` (behind the lanes' front, `rtsearch.serve.lanes`): each message goes to its run's lane, one
        chunk builder a lane (`read_lanes`); ``n_lanes`` of them."""
        self.sock = sock
        flush_ms = tuning().intake_flush_ms
        if flush_ms is None:
            flush_ms = 1e3 * (FLUSH_S if lanes is None else LANES_FLUSH_S)
        self.flush_ns = int(flush_ms * share * 1e6)
        self.coalesce_hz = COALESCE_HZ / share
        self.keep_ms1 = keep_ms1
        self.lanes = lanes
        self.builders = [ChunkBuilder(keep_ms1=keep_ms1) for _ in range(n_lanes if lanes is not None else 1)]
        self._arrivals: collections.deque[int] = collections.deque(maxlen=RATE_WINDOW)

    def rate_hz(self) -> float:
        """Arrivals per second over the last `RATE_WINDOW` messages (0 until there are two)."""
        a = self._arrivals
        return (len(a) - 1) / max(a[-1] - a[0], 1) * 1e9 if len(a) > 1 else 0.0

    def read(self) -> list[SpectraChunk | Received]:
        """What is queued (and, at high rates, what comes within `FLUSH_S`), decoded, in order.

        Peaks are checked per chunk (`ChunkBuilder.build`), not per message.
        """
        return [item for share in self.read_lanes() for item in share]

    def read_lanes(self) -> list[list[SpectraChunk | Received]]:
        """`read`, as each lane's share (one list without ``lanes``): a message goes to its run's lane (lane 0 when
        it names none), in order within each lane; a ``run.end`` is told to the registry."""
        sock, builders, arrivals, lanes = self.sock, self.builders, self._arrivals, self.lanes
        recv, events, wall, mono = sock.recv, sock.get, time.time_ns, time.monotonic_ns
        out: list[list[SpectraChunk | Received]] = [[] for _ in builders]
        flush_at = mono() + self.flush_ns
        coalesce = self.rate_hz() > self.coalesce_hz
        for _ in range(CHUNK_MAX):
            # the EVENTS check is cheaper than the exception of an empty recv; poll waits 1 ms at most
            if not int(events(_EVENTS)) & _POLLIN and (not coalesce or mono() >= flush_at or not sock.poll(1)):
                break
            # frame objects carry `more`: half the cost of recv_multipart's option lookups per frame
            frame = recv(_NOBLOCK, copy=False)
            frames = [frame]
            while frame.more:
                frame = recv(_NOBLOCK, copy=False)
                frames.append(frame)
            w, m = wall(), mono()
            arrivals.append(m)
            msg = decode_spectra(frames) if frames[0].bytes == SPECTRA_TOPIC else decode(frames, peaks="raw")
            k = 0
            if lanes is not None and isinstance(run := getattr(msg, "run", None), str):
                k = lanes(run)
            if isinstance(msg, RawSpectrum):
                builders[k].add(msg, w, m)
            else:
                if len(builders[k]):
                    out[k].extend(builders[k].build())
                out[k].extend(block_items(msg, w, m, keep_ms1=self.keep_ms1) if isinstance(msg, SpectraBlock)
                              else [Received(msg, w, m)])  # fmt: skip
                if lanes is not None and isinstance(msg, RunEnd):
                    lanes.end(msg.run)
            if m >= flush_at:
                break
        for k, builder in enumerate(builders):
            if len(builder):
                out[k].extend(builder.build())
        return out
