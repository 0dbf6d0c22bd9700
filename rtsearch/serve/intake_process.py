"""The intake process: reads the spectra socket, decodes every message, hands chunks to the daemon.

Started by `rtsearch.serve.intake.Intake` (its docstring says why intake has a process of
its own). It speaks to the daemon over a Unix socket pair in `rtsearch.serve.chunks`'
messages:

- to the daemon: ``READY`` (the endpoint it listens on) or ``ERROR`` (why it
  cannot) once at start; then, in arrival order, ``SPECTRA`` (a `SpectraChunk`) for
  each run of consecutive valid spectra and ``MESSAGE`` (a pickled `Received`) for
  each control or malformed message; ``CLOSED`` after its last read.
- from the daemon: ``STOP``: read what the socket still holds (until it stays empty for `DRAIN_QUIET_S`,
  at most `DRAIN_MAX_S`), send it, say ``CLOSED``, exit. End of file (the daemon is gone) ends it too.

Its socket is the daemon's spectra socket (``sub``: connected to the instrument; ``pull``: bound), or,
behind the door (`rtsearch.serve.door`, several intake processes), a PULL connected to the door's
``ipc://`` endpoint (``door``).

It ignores SIGINT and SIGTERM: a terminal's Ctrl-C or a service manager reaches the
whole process group, and the daemon decides when intake closes.
"""

from __future__ import annotations

import collections
import contextlib
import pickle
import signal
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from rtsearch.matches import Results
from rtsearch.serve.admission import Advice, late_rows
from rtsearch.serve.chunks import (
    CLOSED,
    ERROR,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    MESSAGE,
    READY,
    SHED,
    SPECTRA,
    ChunkBuilder,
    Received,
    ShedChunk,
    SpectraChunk,
    block_items,
    pack,
)  # fmt: skip
from rtsearch.serve.publisher_process import send_results
from rtsearch.serve.runtime import name_os_thread
from rtsearch.wire import RawSpectrum, decode
from rtsearch.wire_batch import SPECTRA as SPECTRA_TOPIC
from rtsearch.wire_batch import SpectraBlock, decode_spectra

CHUNK_MAX = 512  # messages per chunk at most: bounds the daemon's lock hold per chunk
FLUSH_S = 0.001  # a chunk goes at most this long after its first message was read
COALESCE_HZ = 4000.0  # above this arrival rate a chunk waits (up to FLUSH_S) for more messages
RATE_WINDOW = 32  # arrivals the rate is measured over
DRAIN_QUIET_S = 0.02  # at STOP, the socket counts as drained once it stayed empty this long
DRAIN_MAX_S = 1.0  # ... or after this long (a sender that keeps sending is not read forever)
SHED_REPORT_NS = 20_000_000  # spectra answered at the door are reported to the daemon at most this late
HOLD_NS = 5_000_000  # the daemon this far behind its pipe: what is read waits here, where it can still be shed
HOLD_POLL_MS = 1  # how often what waits here is looked at again
SHED_REASON = "overload: the daemon's queue would answer it after its budget (answered at the door)"

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
    second, each as large, as from one intake process — its cost is per chunk, not per spectrum.
    """

    def __init__(self, sock: zmq.Socket[bytes], *, share: int = 1, keep_ms1: bool = False) -> None:
        self.sock = sock
        self.flush_ns = int(FLUSH_S * share * 1e9)
        self.coalesce_hz = COALESCE_HZ / share
        self.keep_ms1 = keep_ms1
        self.builder = ChunkBuilder(keep_ms1=keep_ms1)
        self._arrivals: collections.deque[int] = collections.deque(maxlen=RATE_WINDOW)

    def rate_hz(self) -> float:
        """Arrivals per second over the last `RATE_WINDOW` messages (0 until there are two)."""
        a = self._arrivals
        return (len(a) - 1) / max(a[-1] - a[0], 1) * 1e9 if len(a) > 1 else 0.0

    def read(self) -> list[SpectraChunk | Received]:
        """What is queued (and, at high rates, what comes within `FLUSH_S`), decoded, in order.

        Peaks are checked per chunk (`ChunkBuilder.build`), not per message.
        """
        sock, builder, arrivals = self.sock, self.builder, self._arrivals
        recv, events, wall, mono = sock.recv, sock.get, time.time_ns, time.monotonic_ns
        items: list[SpectraChunk | Received] = []
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
            if isinstance(msg, RawSpectrum):
                builder.add(msg, w, m)
            else:
                if len(builder):
                    items.extend(builder.build())
                items.extend(block_items(msg, w, m, keep_ms1=self.keep_ms1) if isinstance(msg, SpectraBlock)
                             else [Received(msg, w, m)])  # fmt: skip
            if m >= flush_at:
                break
        if len(builder):
            items.extend(builder.build())
        return items


Item = SpectraChunk | Received | ShedChunk
_RUN, _SCAN, _SENT, _WALL, _BATCHED = (INT_COLUMNS.index(c) for c in ("run", "scan", "sent_ns", "wall_ns", "batched"))
_PREC = FLOAT_COLUMNS.index("precursor_mz")
_MONO = INT_COLUMNS.index("mono_ns")


class Door:
    """Answers ``shed`` here the spectra the daemon's predicted wait would make late (`rtsearch.serve.admission`).

    Their result messages go at once to the daemon's results proxy; the daemon, which only books them, gets
    them gathered over up to `SHED_REPORT_S` as one `ShedChunk` (no peaks): its cost is per chunk, and under
    overload a report a read would cost it what the shedding saves. While the daemon is more than `HOLD_NS`
    behind what it was handed (`holding`), the process keeps what it reads, screens it again as it ages and
    hands the rest over merged once the daemon caught up (`serve`): a spectrum that grows late meanwhile is
    answered here, in time, not by a daemon that would see it only after its budget.
    """

    def __init__(
        self, ctx: zmq.Context[Any], results: str, advice: Advice, budget_ms: float, index: int, share: int = 1
    ) -> None:  # fmt: skip
        self.push = ctx.socket(zmq.PUSH)
        self.push.setsockopt(zmq.SNDHWM, 0)
        self.push.setsockopt(zmq.LINGER, -1)  # what was answered is delivered before the process ends
        self.push.connect(results)
        self.advice = advice
        self.budget_ms = budget_ms
        self.index = index  # this process's slot in the advice
        self.share = share  # intake processes behind the door: each sees 1/share of the spectra
        self._said = 0  # the advice the count below is since
        self._admitted = 0  # MS2+ spectra handed over since
        self._unacked: collections.deque[int] = collections.deque()  # newest receipt stamp of each item handed over
        self._pending: list[SpectraChunk] = []  # answered, not yet reported
        self._published: list[np.ndarray] = []
        self._since = 0  # monotonic ns of the oldest pending report

    def apply(self, items: list[SpectraChunk | Received]) -> list[Item]:
        """``items`` without the spectra answered here, consecutive chunks merged (at most `CHUNK_MAX` rows each),
        after the report of those answered (when due): what goes to the daemon now."""
        out = _merged(self.screen(items, hand_over=True))
        for sent in out:  # in arrival order
            if isinstance(sent, Received):
                self._unacked.append(sent.mono_ns)
            elif isinstance(sent, SpectraChunk):
                self._unacked.append(int(sent.ints[-1, _MONO]))
        return [*self.report(), *out]

    def screen(self, items: list[SpectraChunk | Received], *, hand_over: bool = False) -> list[SpectraChunk | Received]:
        """``items`` without the spectra answered here now (those held are aged to now: ``hand_over`` false).

        A spectrum's wait is the daemon's queue (`Advice.wait_ns`), plus what the spectra handed over since that
        advice add to it (`Advice.slope_ns`; those of the other intake processes counted as this one's), plus
        how long the oldest item this process handed over and the daemon did not take yet has been waiting
        (its event loop may lag behind).
        """
        wait = self.advice.wait_ns() + self.pipe_ns()
        if wait <= 0:
            return list(items)
        said = self.advice.said_ns()
        if said != self._said:
            self._said, self._admitted = said, 0
        slope, now = self.advice.slope_ns(), None if hand_over else time.time_ns()
        out: list[SpectraChunk | Received] = []
        for item in items:
            if isinstance(item, SpectraChunk):
                rows, admitted = late_rows(item.ints, item.floats, wait_ns=wait, default_budget_ms=self.budget_ms,
                                           now_ns=now, slope_ns=slope, ahead=self._admitted * self.share)  # fmt: skip
                if hand_over:
                    self._admitted += admitted
                if len(rows):
                    kept, taken = item.split(rows)
                    self._answer(taken)
                    if kept is None:
                        continue
                    item = kept
            out.append(item)
        return out

    def holding(self) -> bool:
        """Whether what is read should stay here for now: the daemon is more than `HOLD_NS` behind its pipe."""
        return self.pipe_ns() > HOLD_NS

    def pipe_ns(self) -> int:
        """How long the oldest item handed over and not yet taken by the daemon has been waiting (0: none)."""
        taken, unacked = self.advice.taken_ns(self.index), self._unacked
        while unacked and unacked[0] <= taken:
            unacked.popleft()
        return time.monotonic_ns() - unacked[0] if unacked else 0

    def report(self, *, now: bool = False) -> list[ShedChunk]:
        """The pending report, when `SHED_REPORT_S` passed since its first spectrum (or ``now``)."""
        if not self._pending or (not now and time.monotonic_ns() - self._since < SHED_REPORT_NS):
            return []
        chunk = self._pending[0] if len(self._pending) == 1 else SpectraChunk.concat(self._pending)
        shed = ShedChunk(chunk, SHED_REASON, np.concatenate(self._published))
        self._pending, self._published = [], []
        return [shed]

    def due_in_ms(self) -> int | None:
        """Milliseconds until the pending report is due (``None``: nothing pending)."""
        if not self._pending:
            return None
        return max(0, (SHED_REPORT_NS - (time.monotonic_ns() - self._since)) // 1_000_000 + 1)

    def _answer(self, chunk: SpectraChunk) -> None:
        run, ints = chunk.ints[:, _RUN], chunk.ints
        for r in sorted(set(run.tolist())):
            rows = np.flatnonzero(run == r)
            results = Results.unscored(chunk.runs[r], ints[rows, _SCAN], chunk.floats[rows, _PREC],
                                       [SHED_REASON] * len(rows), "shed")  # fmt: skip
            send_results(self.push, results, ints[rows, _SENT], ints[rows, _WALL], ints[rows, _BATCHED] != 0)
        if not self._pending:
            self._since = time.monotonic_ns()
        self._pending.append(chunk)
        self._published.append(np.full(len(chunk), time.monotonic_ns(), dtype=np.int64))

    def close(self) -> None:
        self.push.close()


def _merged(items: list[SpectraChunk | Received]) -> list[SpectraChunk | Received]:
    """``items`` with consecutive chunks joined, up to `CHUNK_MAX` spectra each (the daemon's cost is per chunk)."""
    out: list[SpectraChunk | Received] = []
    run: list[SpectraChunk] = []
    for item in [*items, None]:
        if isinstance(item, SpectraChunk) and sum(map(len, run)) + len(item) <= CHUNK_MAX:
            run.append(item)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else SpectraChunk.concat(run))
        run = [item] if isinstance(item, SpectraChunk) else []
        if isinstance(item, Received):
            out.append(item)
    return out


def send_items(conn: socket.socket, items: Sequence[Item]) -> None:
    """Each item as one message to the daemon."""
    for item in items:
        if isinstance(item, Received):
            conn.sendall(pack(MESSAGE, [pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)]))
        elif isinstance(item, ShedChunk):
            conn.sendall(pack(SHED, item.parts()))
        else:
            conn.sendall(pack(SPECTRA, item.parts()))


def drain(sock: zmq.Socket[bytes], reader: Reader, conn: socket.socket, screen: Any) -> None:
    """Read and send what ``sock`` still holds, until it stays empty `DRAIN_QUIET_S` (at most `DRAIN_MAX_S`)."""
    end = time.monotonic() + DRAIN_MAX_S
    while time.monotonic() < end and sock.poll(int(DRAIN_QUIET_S * 1e3)):
        send_items(conn, screen(reader.read()))


@dataclass(frozen=True)
class Shedding:
    """What an intake process needs to answer at the door: where results go, the daemon's advice, the budget of
    spectra that give none."""

    results: str
    advice: Any  # the shared word of `Advice`
    budget_ms: float


def serve(
    conn: socket.socket, endpoint: str, mode: str, hwm: int, share: int = 1, shedding: Shedding | None = None,
    index: int = 0, keep_ms1: bool = False,
) -> None:
    """The process's main function (see the module docstring)."""
    name_os_thread(f"intake_{index}")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    conn.setblocking(True)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB if mode == "sub" else zmq.PULL)  # "door": a PULL connected to the door
    sock.setsockopt(zmq.RCVHWM, hwm)  # 0: unbounded in ZeroMQ; the daemon's batcher bounds memory
    sock.setsockopt(zmq.LINGER, 0)
    try:
        if mode == "sub":
            # everything: a message on an unknown topic is counted as invalid, not filtered unseen
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.connect(endpoint)
            bound = endpoint
        elif mode == "door":
            sock.connect(endpoint)
            bound = endpoint
        else:
            sock.bind(endpoint)
            bound = sock.getsockopt_string(zmq.LAST_ENDPOINT)
    except zmq.ZMQError as e:
        with contextlib.suppress(OSError):
            conn.sendall(pack(ERROR, [str(e).encode()]))
        sock.close(0)
        ctx.term()
        return
    reader = Reader(sock, share=share, keep_ms1=keep_ms1)
    door = Door(ctx, shedding.results, Advice(shedding.advice), shedding.budget_ms, index, share) if shedding else None
    screen = door.apply if door is not None else list
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(conn.fileno(), zmq.POLLIN)
    held: list[SpectraChunk | Received] = []  # read while the daemon lagged (`Door.holding`), in order
    try:
        conn.sendall(pack(READY, [bound.encode()]))
        while True:
            due = door.due_in_ms() if door is not None else None
            if held:
                due = HOLD_POLL_MS if due is None else min(due, HOLD_POLL_MS)
            events = dict(poller.poll(due))
            if door is None:
                if sock in events:
                    send_items(conn, reader.read())
            else:
                if sock in events:
                    held.extend(reader.read())
                if held and not door.holding():
                    send_items(conn, door.apply(held))
                    held = []
                else:
                    held = door.screen(held)  # what became late while held is answered now
                    send_items(conn, door.report())
            if conn.fileno() in events:
                if held:
                    send_items(conn, screen(held))
                if conn.recv(1):  # STOP: what the socket holds is read first (end of file: the daemon is gone)
                    drain(sock, reader, conn, screen)
                if door is not None:
                    send_items(conn, list(door.report(now=True)))
                break
        conn.sendall(pack(CLOSED))
    except OSError:  # the daemon is gone: nobody to hand anything to
        pass
    finally:
        if door is not None:
            door.close()
        sock.close(0)
        ctx.term()
        conn.close()
