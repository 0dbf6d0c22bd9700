"""The intake process: reads the spectra socket, decodes every message, hands chunks to the daemon.

Started by `rtsearch.serve.intake.intake.Intake` (its docstring says why intake has a process of
its own). It speaks to the daemon over a Unix socket pair in `rtsearch.serve.intake.chunks`'
messages:

- to the daemon: the child handshake once at start (`rtsearch.serve.children.child`: ready with the endpoint it
  listens on, or why it cannot); then, in arrival order, ``SPECTRA`` (a `SpectraChunk`) for
  each run of consecutive valid spectra, ``MESSAGE`` (a pickled `Received`: this process is the daemon's own,
  forked for it, and the pair is theirs alone) for each control or malformed message, and ``SHED`` (a `ShedChunk`)
  for the spectra it answers at the door; ``CLOSED`` after its last read.
- from the daemon: ``ACK`` (a shed report journaled: its answers are published now, `Door`); ``STOP``: read what
  the socket still holds (until it stays empty for `DRAIN_QUIET_S`, at most `DRAIN_MAX_S`), send it, say
  ``CLOSED``, publish what the daemon acknowledges until it closes its end (at most `ACK_WAIT_S`), exit. End of file
  (the daemon is gone) ends it at once, and so does the daemon's death whatever killed it (its `Child`).

Its socket is the daemon's spectra socket (``sub``: connected to the instrument; ``pull``: bound), or,
behind the door (`rtsearch.serve.intake.door`, several intake processes), a PULL connected to the door's
``ipc://`` endpoint (``door``).

Behind the lanes' front (`rtsearch.serve.lanes`, started by it) a process has one socket pair a lane and hands
each lane the chunks of its runs (`rtsearch.serve.intake.reader.Reader.read_lanes`), answering at each lane's door with
that lane's advice (`Out`); READY, STOP and end of file then come and go on the front's own socket pair, and
``CLOSED`` goes to every lane.

It is a `rtsearch.serve.children.child.Child`: it ignores SIGINT and SIGTERM (a terminal's Ctrl-C or a service manager
reaches the whole process group, and the daemon decides when intake closes) and ends with the daemon.
"""

from __future__ import annotations

import collections
import pickle
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from rtsearch.matches import Results
from rtsearch.protocol.wire import MAX_MESSAGE_BYTES
from rtsearch.serve.children.child import StartFailed, ready
from rtsearch.serve.children.framing import Unpacker, pack
from rtsearch.serve.engine.admission import Advice, late_rows
from rtsearch.serve.intake.chunks import (
    ACK,
    CHUNK_MAX,
    CLOSED,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    MESSAGE,
    SHED,
    SPECTRA,
    STOP,
    Received,
    ShedChunk,
    SpectraChunk,
    budgets_ns,
    merged,
)  # fmt: skip
from rtsearch.serve.intake.reader import Reader
from rtsearch.serve.intake.routing import LaneOf
from rtsearch.serve.outputs.publisher_process import send_results

DRAIN_QUIET_S = 0.02  # at STOP, the socket counts as drained once it stayed empty this long
DRAIN_MAX_S = 1.0  # ... or after this long (a sender that keeps sending is not read forever)
# spectra answered at the door are reported to the daemon at most this late (its cost is per report), and sooner
# when the budget of one of them would be over before the daemon's acknowledgement could come back (`REPORT_ROOM_NS`):
# their answers go out once the daemon has journaled the report. At ten times capacity on 2 cores (the shared client,
# 50 ms budgets) 20 and 5 ms published door sheds 23 / 46 / 55 ms after receipt (p50 / p99 / max), 0.5 % late: the
# daemon's acknowledgement can take 25 ms there; 10 and 15 ms: 16 / 35 / 44 ms, none late in two runs
# (tests/integration/test_overload_client.py, 2026-12-06)
SHED_REPORT_NS = 10_000_000
REPORT_ROOM_NS = 15_000_000  # the time left of a pending spectrum's budget at which its report goes at once
ACK_WAIT_S = 30.0  # stopping: how long the daemon's acknowledgements of the last shed reports are waited for at most
PUSH_LINGER_MS = 2000  # what was published is delivered to the results proxy before the process ends, unless gone
HOLD_NS = 5_000_000  # the daemon this far behind its pipe: what is read waits here, where it can still be shed
HOLD_POLL_MS = 1  # how often a process holding what it read looks whether the daemon caught up
# how often what is held is screened again (what is read is screened as it comes): each pass costs ~20 µs a held chunk
# (development machine), and re-screening every held chunk at each read and each poll kept an intake process busy
# exactly while the daemon lagged. Safe below `HOLD_NS`: while held a spectrum's predicted wait exceeds HOLD_NS, so
# one predicted late just after a pass is answered before its budget runs out
HOLD_SCREEN_NS = 2_000_000
SHED_REASON = "overload: the daemon's queue would answer it after its budget (answered at the door)"

Item = SpectraChunk | Received | ShedChunk
_RUN, _SCAN, _SENT, _WALL, _BATCHED = (INT_COLUMNS.index(c) for c in ("run", "scan", "sent_ns", "wall_ns", "batched"))
_PREC = FLOAT_COLUMNS.index("precursor_mz")
_MONO = INT_COLUMNS.index("mono_ns")


class Door:
    """Answers ``shed`` here the spectra the daemon's predicted wait would make late
    (`rtsearch.serve.engine.admission`).

    Journal first: the spectra answered here go to the daemon gathered over up to `SHED_REPORT_NS` as one numbered
    `ShedChunk` (no peaks: its cost is per chunk, and under overload a report a read would cost it what the shedding
    saves); the daemon books them in their runs — its journal first — and acknowledges the report (`acked`), and only
    then are their result messages sent to its results proxy. A daemon that dies before acknowledging leaves them
    unpublished: nothing is published that no journal holds. While the daemon is more than `HOLD_NS` behind what it
    was handed (`holding`), the process keeps what it reads, screens it again as it ages and hands the rest over
    merged once the daemon caught up (`serve`): a spectrum that grows late meanwhile is answered here, not by a
    daemon that would see it only after its budget.
    """

    def __init__(
        self, ctx: zmq.Context[Any], results: str, advice: Advice, budget_ms: float, index: int, share: int = 1
    ) -> None:  # fmt: skip
        self.push = ctx.socket(zmq.PUSH)
        self.push.setsockopt(zmq.SNDHWM, 0)
        self.push.setsockopt(zmq.LINGER, PUSH_LINGER_MS)  # bounded: a proxy that is gone must not keep us for ever
        self.push.connect(results)
        self.advice = advice
        self.budget_ms = budget_ms
        self.index = index  # this process's slot in the advice
        self.share = share  # intake processes behind the door: each sees 1/share of the spectra
        self._said = 0  # the advice the count below is since
        self._admitted = 0  # MS2+ spectra handed over since
        self._unacked: collections.deque[int] = collections.deque()  # newest receipt stamp of each item handed over
        self._pending: list[SpectraChunk] = []  # answered, not yet reported
        self._due = 0  # monotonic ns when the pending report is due
        self._seq = 0  # reports sent
        self._reported: dict[int, SpectraChunk] = {}  # reports the daemon has not acknowledged yet, by number

    def apply(self, items: list[SpectraChunk | Received]) -> list[Item]:
        """``items`` without the spectra answered here, consecutive chunks merged (at most `CHUNK_MAX` rows each),
        after the report of those answered (when due): what goes to the daemon now."""
        out = merged(self.screen(items, hand_over=True), CHUNK_MAX)
        for sent in out:  # in arrival order
            if isinstance(sent, Received):
                self._unacked.append(sent.mono_ns)
            elif isinstance(sent, SpectraChunk):
                self._unacked.append(int(sent.ints[-1, _MONO]))
        return [*self.report(), *out]

    def screen(self, items: list[SpectraChunk | Received], *, hand_over: bool = False) -> list[SpectraChunk | Received]:
        """``items`` without the spectra answered here now, each aged to now (what this process spent on them since
        receipt counts: on a busy machine it may not run for tens of ms). ``hand_over``: they go to the daemon.

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
        slope, now = self.advice.slope_ns(), time.time_ns()
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
        """The pending report, when `SHED_REPORT_NS` passed since its first spectrum (or ``now``)."""
        if not self._pending or (not now and time.monotonic_ns() < self._due):
            return []
        chunk = self._pending[0] if len(self._pending) == 1 else SpectraChunk.concat(self._pending)
        self._pending = []
        self._seq += 1
        self._reported[self._seq] = chunk
        return [ShedChunk(chunk, SHED_REASON, self._seq)]

    def acked(self, seq: int) -> None:
        """The daemon journaled report ``seq``: its answers are published."""
        chunk = self._reported.pop(seq, None)
        if chunk is None:
            return
        run, ints = chunk.ints[:, _RUN], chunk.ints
        for r in sorted(set(run.tolist())):
            rows = np.flatnonzero(run == r)
            results = Results.unscored(chunk.runs[r], ints[rows, _SCAN], chunk.floats[rows, _PREC],
                                       [SHED_REASON] * len(rows), "shed")  # fmt: skip
            send_results(self.push, results, ints[rows, _SENT], ints[rows, _WALL], ints[rows, _BATCHED] != 0)

    @property
    def unacknowledged(self) -> int:
        """Reports sent whose answers wait for the daemon's acknowledgement."""
        return len(self._reported)

    def due_in_ms(self) -> int | None:
        """Milliseconds until the pending report is due (``None``: nothing pending)."""
        if not self._pending:
            return None
        return max(0, (self._due - time.monotonic_ns()) // 1_000_000 + 1)

    def _answer(self, chunk: SpectraChunk) -> None:
        """``chunk`` answered ``shed`` here: reported within `SHED_REPORT_NS`, or while the most pressing of its
        spectra still has `REPORT_ROOM_NS` of its budget left."""
        ends = chunk.ints[:, _MONO] + budgets_ns(chunk.floats, self.budget_ms).astype(np.int64)
        due = int(ends.min()) - REPORT_ROOM_NS
        self._due = min(self._due, due) if self._pending else min(time.monotonic_ns() + SHED_REPORT_NS, due)
        self._pending.append(chunk)

    def close(self) -> None:
        self.push.close()


def send_items(conn: socket.socket, items: Sequence[Item]) -> None:
    """Each item as one message to the daemon."""
    for item in items:
        if isinstance(item, Received):
            conn.sendall(pack(MESSAGE, [pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)]))
        elif isinstance(item, ShedChunk):
            conn.sendall(pack(SHED, item.parts()))
        else:
            conn.sendall(pack(SPECTRA, item.parts()))


@dataclass(frozen=True)
class Shedding:
    """What an intake process needs to answer at the door: where results go, the daemon's advice, the budget of
    spectra that give none."""

    results: str
    advice: Any  # the shared word of `Advice`
    budget_ms: float


class Inbox:
    """What a daemon (or the lanes' front) sends this process over its socket pair: ``STOP`` and ``ACK``."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.eof = False  # the other end is closed: it is gone
        self._unpacker = Unpacker()

    def receive(self, door: Door | None) -> bool:
        """Read what came (the socket is readable): acknowledgements handed to ``door``; whether ``STOP`` came."""
        try:
            data = self.conn.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return False
        stop = False
        for kind, parts in self._unpacker.feed(data):
            if kind == ACK and door is not None:
                door.acked(int.from_bytes(parts[0], "little"))
            stop |= kind == STOP
        return stop


class Out:
    """A daemon this process hands over to (a lone daemon, or one lane of the lanes' front): its socket pair, its
    door (`Door`, when it answers at the door) and what waits here while it lags (`Door.holding`)."""

    def __init__(self, ctx: zmq.Context[Any], conn: socket.socket, shedding: Shedding | None, index: int,
                 share: int) -> None:  # fmt: skip
        self.conn = conn
        self.inbox = Inbox(conn)
        self.door = Door(ctx, shedding.results, Advice(shedding.advice), shedding.budget_ms, index, share) \
            if shedding else None  # fmt: skip
        self.held: list[SpectraChunk | Received] = []
        self._screened = 0  # monotonic ns of the last pass over what is held

    def due_ms(self) -> int | None:
        due = self.door.due_in_ms() if self.door is not None else None
        return (HOLD_POLL_MS if due is None else min(due, HOLD_POLL_MS)) if self.held else due

    def hand(self, items: list[SpectraChunk | Received]) -> None:
        """``items`` just read: handed over (screened at the door), or held while the daemon lags."""
        if self.door is None:
            if items:
                send_items(self.conn, items)
            return
        door = self.door
        if (self.held or items) and not door.holding():
            send_items(self.conn, door.apply([*self.held, *items]))
            self.held = []
            return
        now = time.monotonic_ns()
        if self.held and now - self._screened >= HOLD_SCREEN_NS:  # what became late while held is answered now
            self.held, self._screened = door.screen(self.held), now
        elif not self.held:
            self._screened = now
        if items:
            self.held.extend(door.screen(items))  # what was just read, at once
        send_items(self.conn, door.report())

    def finish(self, items: Sequence[SpectraChunk | Received]) -> None:
        """Stopping: what is held and ``items`` (the socket's drain) handed over now, then the door's last report."""
        both, self.held = [*self.held, *items], []
        if both:
            send_items(self.conn, self.door.apply(both) if self.door is not None else both)
        if self.door is not None:
            send_items(self.conn, self.door.report(now=True))

    def release(self) -> None:
        if self.door is not None:
            self.door.close()
        self.conn.close()


def serve(
    control: socket.socket, conns: list[socket.socket] | None, endpoint: str, mode: str, hwm: int, share: int = 1,
    shedding: Shedding | list[Shedding | None] | None = None, index: int = 0, keep_ms1: bool = False,
    registry: str = "",
) -> None:  # fmt: skip
    """The process's main function (a `rtsearch.serve.children.child.Child`'s; see the module docstring).
    ``control``: its socket pair with the daemon, or with the lanes' front; ``conns``: behind the front, one socket
    pair a lane (``shedding`` then one a lane, ``registry`` the front's run registry; READY, STOP and end of file
    come and go on ``control``); ``None``: the daemon's pair is ``control``."""
    conns = conns or [control]
    sheddings = shedding if isinstance(shedding, list) else [shedding] * len(conns)
    for conn in {*conns, control}:
        conn.setblocking(True)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB if mode == "sub" else zmq.PULL)  # "door": a PULL connected to the door
    sock.setsockopt(zmq.RCVHWM, hwm)  # 0: unbounded in ZeroMQ; the daemon's batcher bounds memory
    sock.setsockopt(zmq.LINGER, 0)
    if mode == "pull":  # bound here: a peer's frame over the bound drops its connection unread (it reconnects); not
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)  # when we connect (sub, door): ZeroMQ would not reconnect
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
        sock.close(0)
        ctx.term()
        raise StartFailed(str(e)) from None
    outs = [Out(ctx, conn, sh, index, share) for conn, sh in zip(conns, sheddings, strict=True)]
    req = ctx.socket(zmq.REQ) if len(outs) > 1 else None
    if req is not None:
        req.connect(registry)
    reader = Reader(sock, share=share, keep_ms1=keep_ms1, lanes=LaneOf(req) if req else None, n_lanes=len(outs))
    # who may write to this process: each daemon it hands over to (ACK, and STOP when it is the control), the front
    boxes = {out.conn.fileno(): (out.inbox, out.door) for out in outs}
    if control.fileno() not in boxes:
        boxes[control.fileno()] = (Inbox(control), None)
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    for fd in boxes:
        poller.register(fd, zmq.POLLIN)
    try:
        ready(control, bound.encode())
        while True:
            dues = [d for d in (out.due_ms() for out in outs) if d is not None]
            events = dict(poller.poll(min(dues) if dues else None))
            read = reader.read_lanes() if sock in events else [[] for _ in outs]
            for out, items in zip(outs, read, strict=True):
                out.hand(items)
            stop = False
            for fd, (box, door) in boxes.items():
                if fd in events and not box.eof:
                    stop |= box.receive(door)
                    if box.eof:
                        poller.unregister(fd)
            if boxes[control.fileno()][0].eof:
                return  # the daemon (or the lanes' front) is gone: nobody to hand anything to
            # a lane that is gone is the front's to see and say (which lane): this process goes on until told
            if stop:  # what the socket holds is read first
                for out, items in zip(outs, drain(sock, reader, len(outs)), strict=True):
                    out.finish(items)
                break
        for out in outs:
            out.conn.sendall(pack(CLOSED))
        _await_acks(boxes, time.monotonic() + ACK_WAIT_S)
    except OSError:  # the daemon (or a lane) is gone: nobody to hand anything to
        pass
    finally:
        for out in outs:
            out.release()
        if req is not None:
            req.close(0)
        sock.close(0)
        ctx.term()


def _await_acks(boxes: dict[int, tuple[Inbox, Door | None]], deadline: float) -> None:
    """Stopping: publish the shed answers each daemon acknowledges, until none waits, each daemon closed its end or
    ``deadline`` (monotonic s) passed. Those never acknowledged were never journaled: they stay unpublished."""
    poller = zmq.Poller()
    for fd in boxes:
        poller.register(fd, zmq.POLLIN)
    while any(door is not None and door.unacknowledged and not box.eof for box, door in boxes.values()):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        for fd, _ in poller.poll(int(left * 1e3) + 1):
            box, door = boxes[fd]
            if not box.eof:
                box.receive(door)
                if box.eof:
                    poller.unregister(fd)


def drain(sock: zmq.Socket[bytes], reader: Reader, n: int) -> list[list[SpectraChunk | Received]]:
    """What ``sock`` still holds, read until it stays empty `DRAIN_QUIET_S` (at most `DRAIN_MAX_S`), as each
    daemon's share."""
    out: list[list[SpectraChunk | Received]] = [[] for _ in range(n)]
    end = time.monotonic() + DRAIN_MAX_S
    while time.monotonic() < end and sock.poll(int(DRAIN_QUIET_S * 1e3)):
        for mine, items in zip(out, reader.read_lanes(), strict=True):
            mine.extend(items)
    return out
