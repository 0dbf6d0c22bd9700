"""Answers given at the door are published only once the daemon has journaled them (issue 67, S4).

An intake process answers ``shed`` itself what the daemon's queue would make late. It used to publish those answers
at once and report them to the daemon later: a daemon SIGKILLed in between had published answers no journal held
(6-45 of them in 7 of 8 kills under overload). Now the report goes first, numbered, and the answers are published when
the daemon acknowledges it (`Door.acked`), after it journaled them.
"""

from __future__ import annotations

import time

import numpy as np
import zmq

from rtsearch.protocol.wire import decode_result
from rtsearch.serve.engine.admission import Advice
from rtsearch.serve.intake.chunks import INT_COLUMNS, SpectraChunk
from rtsearch.serve.intake.intake_process import HOLD_NS, SHED_REASON, Door
from tests.unit.test_admission import MS, _columns


def test_shed_answers_wait_for_the_daemons_acknowledgement() -> None:
    ctx = zmq.Context()
    results = ctx.socket(zmq.PULL)
    results.bind("inproc://results")
    advice = Advice(intakes=1)
    door = Door(ctx, "inproc://results", advice, 100.0, 0)
    try:
        mono, wall = time.monotonic_ns(), time.time_ns()
        empty = (np.zeros(0), np.zeros(0, np.float32))
        ints, floats = _columns([(2, wall, wall, np.nan)])
        ints[0, INT_COLUMNS.index("mono_ns")] = mono - HOLD_NS - MS  # handed over, never taken: the daemon lags
        assert door.apply([SpectraChunk(["r"], [(2,)], ints, floats, *empty, np.zeros(2, np.int64))])
        ints, floats = _columns([(2, wall - 95 * MS, wall, np.nan)])  # sent 95 ms ago: late by the wait advised
        ints[0, INT_COLUMNS.index("scan")] = 7
        assert door.screen([SpectraChunk(["r"], [(2,)], ints, floats, *empty, np.zeros(2, np.int64))]) == []
        (report,) = door.report(now=True)
        assert report.seq == 1 and report.chunk.ints[:, INT_COLUMNS.index("scan")].tolist() == [7]
        assert door.unacknowledged == 1
        assert not results.poll(300), "a shed answer was published before the daemon journaled it"
        door.acked(2)  # another report's number: nothing of this one goes
        assert not results.poll(100)
        door.acked(1)
        assert results.poll(10_000)
        body = decode_result(results.recv_multipart())
        assert (body["run"], body["scan"], body["status"], body["reason"]) == ("r", 7, "shed", SHED_REASON)
        assert door.unacknowledged == 0
        door.acked(1)  # acknowledged twice: answered once
        assert not results.poll(100)
    finally:
        door.close()
        results.close(0)
        ctx.term()
