"""Overload decided at the door (`rtsearch.serve.engine.admission`): which spectra an intake process sheds, the
daemon's advice going stale, and a chunk split into what goes on and what was answered."""

from __future__ import annotations

import numpy as np

from rtsearch.serve.engine.admission import ADVICE_TTL_NS, MAX_TRUSTED_AGE_NS, Advice, arrival_times, late_rows
from rtsearch.serve.intake.chunks import FLOAT_COLUMNS, INT_COLUMNS, SpectraChunk

MS = 1_000_000


def _columns(rows: list[tuple[int, int, int, float]]) -> tuple[np.ndarray, np.ndarray]:
    """``(ms_level, sent_ns, wall_ns, budget_ms)`` rows as chunk columns (budget NaN: none given)."""
    ints = np.zeros((len(rows), len(INT_COLUMNS)), np.int64)
    floats = np.zeros((len(rows), len(FLOAT_COLUMNS)))
    for i, (level, sent, wall, budget) in enumerate(rows):
        ints[i, INT_COLUMNS.index("ms_level")] = level
        ints[i, INT_COLUMNS.index("sent_ns")] = sent
        ints[i, INT_COLUMNS.index("wall_ns")] = wall
        floats[i, FLOAT_COLUMNS.index("budget_ms")] = budget
    return ints, floats


def test_arrival_ages_by_hand() -> None:
    """What the daemon's `rtsearch_arrival_age_seconds` counts (receipt less sent, where the sender's clock is
    plausible; a stamp "after" receipt is age 0) and `rtsearch_intake_wait_seconds` (receipt to the loop, every row)."""
    t = 10**18
    ints, _ = _columns([(2, t - 5 * MS, t, np.nan), (2, -1, t, np.nan), (1, t - 30 * MS, t, np.nan),
                        (2, t + 2 * MS, t, np.nan), (2, t - MAX_TRUSTED_AGE_NS - 1, t, np.nan)])  # fmt: skip
    ints[:, INT_COLUMNS.index("mono_ns")] = [100 * MS, 101 * MS, 102 * MS, 103 * MS, 104 * MS]  # receipt, monotonic
    age, since = arrival_times(ints, 105 * MS)
    assert age.tolist() == [0.005, 0.03, 0.0] and since.tolist() == [0.005, 0.004, 0.003, 0.002, 0.001]


def test_late_rows_by_hand() -> None:
    t = 10**18  # wall clock at receipt
    ints, floats = _columns([
        (2, t - 5 * MS, t, np.nan),  # age 5 + wait 40 = 45 <= default 50: goes on
        (2, t - 15 * MS, t, np.nan),  # 15 + 40 = 55 > 50: shed
        (2, t - 15 * MS, t, 60.0),  # 55 <= its own 60: goes on
        (1, t - 30 * MS, t, np.nan),  # MS1: counted, never shed
        (2, -1, t, np.nan),  # no sent_ns: age unknown, 0 + 40 <= 50
        (2, t + 5 * MS, t, np.nan),  # sent "after" receipt (clocks differ a little): age 0
        (2, t - MAX_TRUSTED_AGE_NS - 1, t, np.nan),  # a sender clock a minute off: age unknown, not shed
        (2, t - 5 * MS, t, 44.0),  # 45 > 44: shed
    ])  # fmt: skip
    rows, admitted = late_rows(ints, floats, wait_ns=40 * MS, default_budget_ms=50.0)
    assert rows.tolist() == [1, 7] and admitted == 5  # the MS1 spectrum is not queued
    rows, admitted = late_rows(ints, floats, wait_ns=0, default_budget_ms=50.0)
    assert rows.tolist() == [] and admitted == 7
    # seen again 6 ms after receipt: row 0 is 11 ms old (11 + 40 > 50), row 2 21 ms (61 > 60); row 5, sent
    # "5 ms after" receipt, is 1 ms old
    rows, _ = late_rows(ints, floats, wait_ns=40 * MS, default_budget_ms=50.0, now_ns=t + 6 * MS)
    assert rows.tolist() == [0, 1, 2, 7]


def test_late_rows_count_the_spectra_queued_before_them() -> None:
    t = 10**18
    # each has 50 - 10 - 30 = 10 ms of room; 3 ms a spectrum queued ahead of it
    ints, floats = _columns([(2, t - 10 * MS, t, np.nan)] * 5 + [(2, t - 45 * MS, t, np.nan), (2, t, t, np.nan)])
    rows, admitted = late_rows(ints, floats, wait_ns=30 * MS, default_budget_ms=50.0, slope_ns=3 * MS, ahead=1)
    # rows 0..2 wait behind 1, 2, 3 (3, 6, 9 ms <= 10); row 3 behind 4 (12 > 10); row 4 behind 5, row 3 counted
    # though shed (an upper bound); row 5 is late whatever the queue and holds no place; row 6 (20 ms of room)
    # behind 6 (18 ms)
    assert rows.tolist() == [3, 4, 5] and admitted == 4


def test_advice_goes_stale_when_not_renewed() -> None:
    now = [1_000 * MS]
    advice = Advice(clock=lambda: now[0])
    assert advice.wait_ns() == 0  # nothing said yet
    advice.set_wait(30 * MS)
    now[0] += ADVICE_TTL_NS
    assert advice.wait_ns() == 30 * MS
    now[0] += 1
    assert advice.wait_ns() == 0  # the daemon went quiet: idle, nothing waits
    advice.set_wait(-5)
    assert advice.wait_ns() == 0
    other = Advice(advice.shared, clock=lambda: now[0])  # what an intake process sees through the shared words
    advice.set_wait(7 * MS)
    assert other.wait_ns() == 7 * MS


def test_the_advice_ages_by_its_part_that_passes_with_the_clock() -> None:
    """30 ms said while the engine becomes free in 12: 4 ms later a newcomer waits 26 ms, from 12 ms on 18 (its own
    batch and the headroom do not pass), stale after `ADVICE_TTL_NS`."""
    now = [1_000 * MS]
    advice = Advice(clock=lambda: now[0])
    advice.set_wait(30 * MS, elapsing_ns=12 * MS)
    assert advice.wait_ns() == 30 * MS
    now[0] += 4 * MS
    assert advice.wait_ns() == 26 * MS
    now[0] += 20 * MS
    assert advice.wait_ns() == 18 * MS
    now[0] += ADVICE_TTL_NS
    assert advice.wait_ns() == 0
    advice.set_wait(5 * MS, elapsing_ns=9 * MS)  # never more than the wait itself
    now[0] += 7 * MS
    assert advice.wait_ns() == 0


def test_split_keeps_peaks_of_what_goes_on_and_drops_those_answered() -> None:
    ints = np.arange(4 * len(INT_COLUMNS), dtype=np.int64).reshape(4, -1)
    floats = np.arange(4 * len(FLOAT_COLUMNS), dtype=np.float64).reshape(4, -1)
    offsets = np.array([0, 2, 5, 5, 9])  # 2, 3, 0 and 4 peaks
    mz = np.arange(9, dtype=np.float64) + 100
    chunk = SpectraChunk(["a", "b"], [(2,), (3,), (2, 3), (4,)], ints, floats, mz, mz.astype(np.float32), offsets)
    kept, taken = chunk.split(np.array([1, 3]))
    assert kept is not None
    assert kept.ints.tolist() == ints[[0, 2]].tolist() and kept.charges == [(2,), (2, 3)]
    assert kept.offsets.tolist() == [0, 2, 2] and kept.mz.tolist() == [100.0, 101.0]
    assert taken.ints.tolist() == ints[[1, 3]].tolist() and taken.floats.tolist() == floats[[1, 3]].tolist()
    assert taken.charges == [(3,), (4,)] and len(taken.mz) == 0 and taken.offsets.tolist() == [0, 0, 0]
    assert taken.runs == ["a", "b"]
    again = SpectraChunk.from_parts([memoryview(bytes(p)) for p in kept.parts()])
    assert again.mz.tolist() == kept.mz.tolist() and again.ints.tolist() == kept.ints.tolist()
    none_left, everything = chunk.split(np.arange(4))
    assert none_left is None and len(everything) == 4


def test_concat_merges_runs_and_peaks() -> None:
    def chunk(runs: list[str], run_col: list[int], n_peaks: list[int], first: float) -> SpectraChunk:
        ints = np.zeros((len(run_col), len(INT_COLUMNS)), np.int64)
        ints[:, INT_COLUMNS.index("run")] = run_col
        offsets = np.concatenate([[0], np.cumsum(n_peaks)]).astype(np.int64)
        mz = first + np.arange(offsets[-1], dtype=np.float64)
        return SpectraChunk(runs, [(2,)] * len(run_col), ints, np.zeros((len(run_col), len(FLOAT_COLUMNS))), mz,
                            mz.astype(np.float32), offsets)  # fmt: skip

    both = SpectraChunk.concat([chunk(["a", "b"], [1, 0], [1, 2], 100.0), chunk(["b", "c"], [0, 1], [2, 0], 200.0)])
    assert both.runs == ["a", "b", "c"]  # in order of the chunks' run lists
    assert [both.runs[r] for r in both.ints[:, INT_COLUMNS.index("run")].tolist()] == ["b", "a", "b", "c"]
    assert both.offsets.tolist() == [0, 1, 3, 5, 5] and both.mz.tolist() == [100.0, 101.0, 102.0, 200.0, 201.0]


def test_the_daemon_says_what_it_took_from_each_intake() -> None:
    advice = Advice(intakes=2)
    assert advice.taken_ns(0) == advice.taken_ns(1) == 0
    advice.processed(1, 1_000 * MS)
    assert advice.taken_ns(0) == 0 and advice.taken_ns(1) == 1_000 * MS
    seen = Advice(advice.shared)
    assert seen.taken_ns(1) == 1_000 * MS
    advice.processed(1, 900 * MS)  # a door report taken after the chunk: its spectra came before the chunk's last
    assert seen.taken_ns(1) == 1_000 * MS  # still taken: the door's pipe is not waiting on that chunk


def test_the_door_counts_only_what_waits_in_its_pipe() -> None:
    """An idle gap is no backlog: the wait the door adds is the age of the oldest item the daemon did not take."""
    import time

    import zmq

    from rtsearch.serve.intake.intake_process import Door

    ctx = zmq.Context()
    advice = Advice(intakes=1)
    door = Door(ctx, "inproc://nobody-reads", advice, 100.0, 0)
    try:
        ints, floats = _columns([(2, -1, 0, np.nan)])
        ints[0, INT_COLUMNS.index("mono_ns")] = time.monotonic_ns() - 30 * MS  # received 30 ms ago
        chunk = SpectraChunk(["r"], [(2,)], ints, floats, np.zeros(0), np.zeros(0, np.float32), np.zeros(2, np.int64))
        assert door.pipe_ns() == 0  # nothing handed over
        assert door.apply([chunk]) == [chunk]  # no wait advised: it goes on
        assert 30 * MS <= door.pipe_ns() < 10_000 * MS  # handed over 30 ms after receipt, not taken yet
        advice.processed(0, int(ints[0, INT_COLUMNS.index("mono_ns")]))
        advice.processed(0, int(ints[0, INT_COLUMNS.index("mono_ns")]) - 10 * MS)  # then a door report, older
        assert door.pipe_ns() == 0 and not door.holding()  # taken (the report's stamp held all it read: 30 s seen)
    finally:
        door.close()
        ctx.term()


def test_the_door_holds_what_it_reads_while_the_daemon_lags_and_sheds_what_grows_late_there() -> None:
    import time

    import zmq

    from rtsearch.serve.intake.intake_process import HOLD_NS, Door

    ctx = zmq.Context()
    advice = Advice(intakes=1)
    door = Door(ctx, "inproc://nobody-reads", advice, 100.0, 0)
    try:
        mono, wall = time.monotonic_ns(), time.time_ns()
        first_ints, floats = _columns([(2, wall, wall, np.nan)])
        first_ints[0, INT_COLUMNS.index("mono_ns")] = mono - HOLD_NS - MS  # handed over, never taken
        empty = (np.zeros(0), np.zeros(0, np.float32))
        first = SpectraChunk(["r"], [(2,)], first_ints, floats, *empty, np.zeros(2, np.int64))
        assert door.apply([first]) == [first] and door.holding()
        # two spectra read now: sent 95 and 10 ms ago; the pipe's wait (>= 6 ms) is all that is advised
        ints, floats = _columns([(2, wall - 95 * MS, wall, np.nan), (2, wall - 10 * MS, wall, np.nan)])
        held = SpectraChunk(["r"], [(2,), (2,)], ints, floats, *empty, np.zeros(3, np.int64))
        (kept,) = door.screen([held])
        assert kept.ints[:, INT_COLUMNS.index("sent_ns")].tolist() == [wall - 10 * MS]  # 95 + 6 > 100 ms: shed
        (report,) = door.report(now=True)
        assert report.chunk.ints[:, INT_COLUMNS.index("sent_ns")].tolist() == [wall - 95 * MS]
        advice.processed(0, int(first_ints[0, INT_COLUMNS.index("mono_ns")]))
        assert not door.holding()  # the daemon took what it was given: what is held goes on
    finally:
        door.close()
        ctx.term()


def test_what_is_held_is_screened_again_every_few_ms_not_at_each_read() -> None:
    """While the daemon lags, an intake process used to screen everything it held at each read and each 1-ms poll
    (~20 µs a held chunk): busiest exactly when the daemon was behind. Held chunks are now screened again once
    `HOLD_SCREEN_NS` passed; what is read is screened as it comes; and a spectrum grown late while held is still
    answered at the door, not handed over."""
    import socket
    import time

    import zmq

    from rtsearch.serve.intake.intake_process import HOLD_NS, HOLD_SCREEN_NS, Out, Shedding

    assert HOLD_SCREEN_NS < HOLD_NS  # held spectra wait more than HOLD_NS: a pass that late still answers in time
    ctx = zmq.Context()
    advice = Advice(intakes=1)
    ours, theirs = socket.socketpair()
    out = Out(ctx, ours, Shedding("inproc://nobody-reads", advice.shared, 100.0), 0, 1)
    assert out.door is not None
    passes: list[int] = []
    screen = out.door.screen
    out.door.screen = lambda items, **kw: (passes.append(len(items)), screen(items, **kw))[1]  # type: ignore[method-assign]
    try:
        mono, wall = time.monotonic_ns(), time.time_ns()
        empty = (np.zeros(0), np.zeros(0, np.float32))

        def chunk(sent_ms_ago: float, received_ago_ns: int = 0) -> SpectraChunk:
            ints, floats = _columns([(2, wall - int(sent_ms_ago * MS), wall, np.nan)])
            ints[0, INT_COLUMNS.index("mono_ns")] = mono - received_ago_ns
            return SpectraChunk(["r"], [(2,)], ints, floats, *empty, np.zeros(2, np.int64))

        out.hand([chunk(0, HOLD_NS + MS)])  # handed over, never taken: the daemon lags from now on
        assert out.door.holding() and passes == [1]
        young = chunk(10)
        out.hand([young])  # read while the daemon lags: screened once (10 + >=6 ms < 100 ms: kept)
        assert out.held == [young] and passes == [1, 1]
        for _ in range(20):  # reads and polls within HOLD_SCREEN_NS: what is held is not screened again
            out.hand([])
        assert passes == [1, 1]
        time.sleep(HOLD_SCREEN_NS / 1e9)
        old = chunk(95)  # read now, 95 + >= 6 ms > 100 ms: answered at the door at once
        out.hand([old])
        assert passes == [1, 1, 1, 1] and out.held == [young]  # the held one screened again, the new one shed
        (report,) = out.door.report(now=True)
        assert report.chunk.ints[:, INT_COLUMNS.index("sent_ns")].tolist() == [wall - 95 * MS]
    finally:
        out.release()
        theirs.close()
        ctx.term()
