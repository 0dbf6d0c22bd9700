"""The front door's fault handling (`rtsearch.cluster.door`) against scripted workers speaking the wire of
`rtsearch.cluster.worker` from threads: a batch held by a worker that hangs (heartbeats say busy) or dies
(heartbeats stop) is sent to another and answered once; a partition's piece goes to its owner, and to another
worker only when that worker's slice covers it."""

from __future__ import annotations

import collections
import os
import threading
import time

import numpy as np
import pytest
import zmq

from rtsearch.batch import SpectraBatch
from rtsearch.cluster import frames as wire
from rtsearch.cluster.door import ClusterScorer
from rtsearch.cluster.partition import owners, spectrum_masses
from rtsearch.cluster.pieces import Part, Pieces
from rtsearch.cluster.worker import WorkerSpec
from rtsearch.matches import ScoredBatch, concat_batches, unscored_batch
from rtsearch.types import Spectrum

SLOW_S = 1.6  # a "slow" worker's time a batch: past `_hang_s`'s 1 s floor


class Scripted:
    """A placement whose workers are threads, each saying hello with a pid of its own: ``behaviour[name]`` is "ok",
    "hang" (holds its first batch, beats busy), "slow" (holds each batch `SLOW_S`, beating busy, then answers), "die"
    (its first batch ends it, as a process that exits: no answer, no more heartbeats, its pid in `exited`) or "mute"
    (its first batch silences it for good, as a host cut off: no answer, no heartbeat, nothing seen to exit)."""

    def __init__(self, behaviour: dict[str, str]) -> None:
        self.behaviour, self.stop, self.threads = behaviour, threading.Event(), []
        self.answered: dict[str, list[int]] = {name: [] for name in behaviour}
        self.specs: dict[str, WorkerSpec] = {}
        self.pids = {name: 4_000_000 + k for k, name in enumerate(behaviour)}  # no process of this host's
        self._exited: frozenset[int] = frozenset()

    def start(self, specs: list[WorkerSpec]) -> None:
        for spec in specs:
            self.specs[spec.name] = spec
            t = threading.Thread(target=self._run, args=(spec,), daemon=True)
            t.start()
            self.threads.append(t)

    def exited(self) -> frozenset[int]:
        return self._exited

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(2)

    def _run(self, spec: WorkerSpec) -> None:
        ctx = zmq.Context.instance()
        sock, beats = ctx.socket(zmq.DEALER), ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.IDENTITY, spec.identity)
        for s, ep in ((sock, spec.router), (beats, spec.beats)):
            s.setsockopt(zmq.LINGER, 0)
            if spec.keys is not None:
                spec.keys.client(s)
            s.connect(ep)
        sock.send_multipart([b"hello", wire.hello(wire.Hello(spec.name, spec.piece, self.pids[spec.name], "numpy"))])
        mode, since, last = self.behaviour[spec.name], 0, 0.0
        inbox: collections.deque[tuple[list[bytes], int]] = collections.deque()  # batches and when each came
        held: tuple[list[bytes], int] | None = None  # "slow": the batch in hand
        while not self.stop.is_set():
            if time.monotonic() - last > 0.1 and mode != "dead":
                beats.send_multipart(wire.beat_frames(spec.identity, time.monotonic_ns() - since if since else 0))
                last = time.monotonic()
            while sock.poll(0):
                frames = sock.recv_multipart()
                if frames[0] == b"batch":
                    inbox.append((frames, time.monotonic_ns()))
            took = waited = 0  # the scoring time it reports, and how long the batch waited for it
            if held is not None:
                if time.monotonic_ns() - since < SLOW_S * 1e9:
                    time.sleep(0.01)
                    continue
                (frames, came), held = held, None
                took, waited, since = time.monotonic_ns() - since, since - came, 0
            elif not inbox:
                sock.poll(20)
                continue
            else:
                frames, came = inbox.popleft()
                if mode in ("hang", "slow") and not since:
                    since = time.monotonic_ns()  # holds it; beats say busy ("hang": for ever)
                    held = (frames, came) if mode == "slow" else None
                    continue
                if mode in ("die", "mute"):
                    if mode == "die":
                        self._exited = self._exited | {self.pids[spec.name]}
                    mode = "dead"
                    continue
            batch, own = wire.read_batch(frames[2:])
            self.answered[spec.name].append(len(batch))
            scored = unscored_batch("r", batch.scan.tolist(), batch.precursor_mz.tolist(), [spec.name] * len(batch),
                                    n_features=0)  # the reason: who scored it  # fmt: skip
            sock.send_multipart([b"scored", frames[1], wire.times_frame(took, waited, took),
                                 *wire.reply_frames(("scored", scored))])  # fmt: skip
        sock.close(0)
        beats.close(0)


def _batch(masses: list[float]) -> SpectraBatch:
    return SpectraBatch.of([Spectrum("r", k, 2, np.array([100.0]), np.array([1.0], np.float32), m / 2 + 1.00728,
                                     (2,)) for k, m in enumerate(masses)])  # fmt: skip


class Split:
    """Partition's plan (`Pieces`' interface) for the scripted workers: a spectrum whole to the piece of its mass,
    cut at 1,500 Da; worker k's slice serves the masses ``serves[k]``; their answers (`ScoredBatch` es here) put in
    order."""

    def __init__(self, serves: list[tuple[float, float]]) -> None:
        self.serves, self.reopens = serves, [None] * len(serves)

    def route(self, batch: SpectraBatch) -> list[Part]:
        piece = owners(spectrum_masses(batch.precursor_mz, batch.charges), np.array([1500.0]))
        bounds = [-np.inf, 1500.0, np.inf]
        pieces = np.unique(piece).tolist()
        return [Part(p, np.flatnonzero(piece == p), (bounds[p], bounds[p + 1]), True) for p in pieces]

    def finish(self, batch: SpectraBatch, parts: list[tuple[Part, ScoredBatch]]) -> ScoredBatch:
        back = np.empty(len(batch), np.int64)
        back[np.concatenate([part.rows for part, _ in parts])] = np.arange(len(batch))
        return concat_batches([p for _, p in parts]).take(back)

    covers = Pieces.covers


@pytest.mark.parametrize("fault", ["hang", "die", "mute"])
def test_a_batch_held_by_a_failed_worker_is_answered_by_another(fault: str) -> None:
    """Hung (busy past `_hang_s`), exited (its placement saw it end) or silent for `DEAD_AFTER_S`: called dead, its
    batch sent to the other worker, one death."""
    from rtsearch.cluster.door import DEAD_AFTER_S

    placement = Scripted({"w0": fault, "w1": "ok"})
    with ClusterScorer(None, placement, workers=2) as door:  # type: ignore[arg-type]
        w0, w1 = door.workers["w0"], door.workers["w1"]
        w0.batches, w0.seconds_per_spectrum = 1, 0.001  # as if it had answered: hung after 1 s (`_hang_s`)
        w1.batches, w1.seconds_per_spectrum = 1, 0.002  # slower: the batch goes to w0 first
        t0 = time.monotonic()
        got = door.score(_batch([1000.0, 1001.0]))  # to w0 (as idle, faster), which fails on it
        took = time.monotonic() - t0
    assert got.reason == ["w1", "w1"] and got.scan.tolist() == [0, 1] and placement.answered == {"w0": [], "w1": [2]}
    assert door.resent == 1 and door.deaths == 1, (door.resent, door.deaths)
    least = {"hang": 1.0, "die": 0.0, "mute": DEAD_AFTER_S}[fault]  # the hang floor; at once; the silence
    assert least - 0.1 < took < least + 30.0, took  # (not `HANG_FIRST_S` or the batch's budget)


def test_a_worker_called_dead_then_back_as_a_new_process_is_one_death() -> None:
    """Killed, a worker falls silent (called dead: its batch sent again) and its restarted process says hello later:
    one death, in the door's count and in the metrics, not one for the silence and one for the new pid."""
    stats: list = []
    placement = Scripted({"w0": "die", "w1": "ok"})
    with ClusterScorer(None, placement, workers=2, record=stats.append) as door:  # type: ignore[arg-type]
        door.workers["w1"].seconds_per_spectrum = 1.0  # the batch goes to w0 first, which dies on it
        got = door.score(_batch([1000.0]))
        assert got.reason == ["w1"] and door.deaths == 1
        back = zmq.Context.instance().socket(zmq.DEALER)  # w0's restarted process (another pid), as a worker says it
        back.setsockopt(zmq.IDENTITY, placement.specs["w0"].identity)
        back.setsockopt(zmq.LINGER, 0)
        back.connect(door.router)
        back.send_multipart([b"hello", wire.hello(wire.Hello("w0", -1, os.getpid() + 1, "numpy"))])
        deadline = time.monotonic() + 5
        while door.workers["w0"].pid != os.getpid() + 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        back.close(0)
        assert door.workers["w0"].pid == os.getpid() + 1
    assert door.deaths == 1 and sum(st.died for st in stats) == 1, [st for st in stats if st.died]


def test_a_lone_slow_worker_is_waited_for_not_called_hung() -> None:
    # top-down batches vary 10x in time a spectrum: a lone worker past its hang time has no one to hand over to
    placement = Scripted({"w0": "slow"})
    with ClusterScorer(None, placement, workers=1) as door:  # type: ignore[arg-type]
        w0 = door.workers["w0"]
        w0.batches, w0.seconds_per_spectrum = 1, 0.001  # as if it had answered fast: past its hang time after 1 s
        t0 = time.monotonic()
        got = door.score(_batch([1000.0, 1001.0]))
        took = time.monotonic() - t0
    assert got.reason == ["w0", "w0"] and placement.answered == {"w0": [2]}
    assert door.deaths == 0 and door.resent == 0 and SLOW_S - 0.1 < took < SLOW_S + 1.5, took
    (status,) = door.status()  # the scoring time the worker reported: how busy it was (the door's metrics)
    assert status["spectra"] == 2 and SLOW_S - 0.05 < status["scoring_s"] < took, status


def test_a_batch_sent_to_a_busy_worker_says_how_long_it_queued_there() -> None:
    # two engine threads, one worker (`CLUSTER_DEPTH`): the second batch waits at the worker behind the first, and
    # that wait is told apart from its scoring (the daemon's engine-time model leaves it out)
    import concurrent.futures

    placement = Scripted({"w0": "slow"})
    with ClusterScorer(None, placement, workers=1) as door, concurrent.futures.ThreadPoolExecutor(2) as pool:  # type: ignore[arg-type]
        first = pool.submit(door.score, _batch([1000.0]))
        time.sleep(0.3)
        second = pool.submit(door.score, _batch([1001.0, 1002.0]))
        a, b = first.result(10), second.result(10)
    assert placement.answered == {"w0": [1, 2]}
    # the worker's own account, from a batch's arrival there to its start: the first found none ahead, the second
    # waited for the first's SLOW_S less the 0.3 s it came later (and whatever a busy machine adds)
    assert SLOW_S - 0.3 - 0.15 < b.stages["queued"] < SLOW_S - 0.3 + 1.0, b.stages
    assert a.stages["queued"] < 0.25 * b.stages["queued"], (a.stages, b.stages)


def test_partition_sends_each_spectrum_to_its_pieces_owner_and_puts_them_back_in_order() -> None:
    placement = Scripted({"w0": "ok", "w1": "ok"})
    whole = [(-np.inf, np.inf)] * 2
    with ClusterScorer(None, placement, workers=2, pieces=Split(whole)) as door:  # type: ignore[arg-type]
        got = door.score(_batch([2000.0, 1000.0, 2500.0]))
    assert placement.answered == {"w0": [1], "w1": [2]}
    assert got.scan.tolist() == [0, 1, 2] and got.reason == ["w1", "w0", "w1"]


@pytest.mark.parametrize("w0_holds", ["whole", "slice"])
def test_a_dead_owners_piece_goes_only_to_a_worker_whose_slice_covers_it(w0_holds: str) -> None:
    from rtsearch.errors import EngineError

    placement = Scripted({"w0": "ok", "w1": "die"})
    serves = [(-np.inf, np.inf) if w0_holds == "whole" else (-np.inf, 1600.0), (1400.0, np.inf)]
    with ClusterScorer(None, placement, workers=2, pieces=Split(serves), timeout_s=4.0) as door:  # type: ignore[arg-type]
        t0 = time.monotonic()
        if w0_holds == "whole":  # after `FAILOVER_S`, w0 stands in for the dead owner
            got = door.score(_batch([2000.0]))
            assert got.reason == ["w0"] and placement.answered["w0"] == [1]
        else:  # w0 cannot score 2,000 Da: answered with the reason within the budget
            with pytest.raises(EngineError, match="no live cluster worker"):
                door.score(_batch([2000.0]))
            assert placement.answered["w0"] == []
        took = time.monotonic() - t0
    assert took < 4.5


def test_a_piece_held_by_two_workers_goes_to_the_one_less_held_and_past_a_dead_one_at_once() -> None:
    """``[serve] piece_workers = 2``: workers w0, w2 hold piece 0 and w1, w3 piece 1. A batch for piece 0 while
    w0 holds another goes to w2, not behind it; a lane keeping to the second copies sends to w2 while w0 is idle; a
    batch whose first owner dies goes to the piece's other owner as soon as the dead one is called dead, without
    `FAILOVER_S`'s wait for a restart."""
    import concurrent.futures

    from rtsearch.cluster.door import FAILOVER_S

    placement = Scripted({"w0": "slow", "w1": "die", "w2": "ok", "w3": "ok"})
    whole = [(-np.inf, np.inf)] * 2
    with ClusterScorer(None, placement, workers=4, pieces=Split(whole), timeout_s=10.0) as door:  # type: ignore[arg-type]
        assert [w.piece for w in door.workers.values()] == [0, 1, 0, 1]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            held = pool.submit(door.score, _batch([1000.0]))  # to w0 (both idle: the first), which holds it
            time.sleep(0.3)
            other = door.score(_batch([1100.0]))
            assert other.reason == ["w2"] and not held.done()  # at once: not behind w0's batch
            assert held.result(5).reason == ["w0"]
        door._copy = 1  # a lane keeping to the second copies (lane 1 of lanes sharing the workers): w2, w0 idle
        assert door.score(_batch([1000.0])).reason == ["w2"]
        door._copy = -1
        t0 = time.monotonic()
        got = door.score(_batch([2000.0]))  # to w1 (idle, the first of piece 1), which dies with it
        took = time.monotonic() - t0
    assert got.reason == ["w3"] and placement.answered["w1"] == [] and placement.answered["w3"] == [1]
    assert took < FAILOVER_S, took  # called dead as it exited, not after waiting for it
    with pytest.raises(ValueError, match="same number of workers"):
        ClusterScorer(None, Scripted({}), workers=3, pieces=Split(whole))  # type: ignore[arg-type]


def test_with_no_live_worker_a_batch_is_answered_with_the_reason_within_the_budget() -> None:
    from rtsearch.cluster.door import DEAD_AFTER_S
    from rtsearch.errors import EngineError

    placement = Scripted({"w0": "mute"})
    with ClusterScorer(None, placement, workers=1, timeout_s=0.5) as door:  # type: ignore[arg-type]
        t0 = time.monotonic()
        with pytest.raises(EngineError, match="no live cluster worker"):
            door.score(_batch([1000.0]))
        took = time.monotonic() - t0
    # at the budget: not after the worker is called dead for its silence (`DEAD_AFTER_S`), nor when it answers
    assert 0.5 - 0.05 < took < DEAD_AFTER_S, took


def test_an_address_the_door_cannot_bind_is_a_clear_error() -> None:
    from rtsearch.errors import EndpointError

    with pytest.raises(EndpointError, match="cluster_host '203.0.113.7'"):
        ClusterScorer(None, Scripted({}), workers=1, host="203.0.113.7")  # type: ignore[arg-type]


def test_one_slow_batch_widens_the_hang_time_for_a_while_only() -> None:
    """A worker's hang time rests on its slowest recent time a spectrum: one slow batch (a top-down spectrum, or
    one queued behind others) widens it, later ones at the usual pace bring it back (`SLOWEST_DECAY`)."""
    import concurrent.futures

    from rtsearch.cluster.door import HANG_FACTOR, SLOWEST_DECAY, _Request

    placement = Scripted({"w0": "ok"})
    with ClusterScorer(None, placement, workers=1) as door:  # type: ignore[arg-type]
        w0 = door.workers["w0"]

        def answered(rid: int, size: int, seconds: float) -> None:
            now = time.monotonic()
            req = _Request(rid, size, [], -1, None, concurrent.futures.Future(), now, worker="w0", sent=now - seconds)
            door._requests[rid] = req
            w0.inflight.add(rid)
            w0.outstanding += size
            door._from_worker([placement.specs["w0"].identity, b"scored", rid.to_bytes(8, "little"),
                               wire.times_frame(0, 0, 0), b"{}"], now)  # fmt: skip

        answered(1001, 10, 0.01)  # 1 ms a spectrum
        answered(1002, 1, 0.5)  # one slow spectrum: 0.5 s
        w0.outstanding = 100
        assert door._hang_s(w0) == pytest.approx(HANG_FACTOR * 0.5 * 100, rel=0.01)
        for k in range(40):
            answered(2000 + k, 10, 0.01)
        w0.outstanding = 100
        assert door._hang_s(w0) == pytest.approx(HANG_FACTOR * 0.5 * SLOWEST_DECAY**40 * 100, rel=0.05)
        assert door._hang_s(w0) < 0.02 * HANG_FACTOR * 0.5 * 100


def _until(done, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(done())


def test_messages_not_the_wire_are_dropped_counted_and_the_door_goes_on() -> None:
    """Issue 67: what a peer sends is read as `rtsearch.cluster.frames` says — a pickle, a short or unknown message,
    a hello claiming another name or piece, a heartbeat that is not one, a stranger's name — and each is dropped and
    counted, never the dispatcher's end: the next batch is scored."""
    import pickle

    placement = Scripted({"w0": "ok", "w1": "ok"})
    with ClusterScorer(None, placement, workers=2) as door:  # type: ignore[arg-type]
        ctx = zmq.Context.instance()
        rogue, stranger, beats = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER), ctx.socket(zmq.PUSH)
        rogue.setsockopt(zmq.IDENTITY, placement.specs["w1"].identity)  # worst case: a worker's name known
        stranger.setsockopt(zmq.IDENTITY, b"w0")  # the name without the door's token
        for s, ep in ((rogue, door.router), (stranger, door.router), (beats, door.beats)):
            s.setsockopt(zmq.LINGER, 1000)
            s.connect(ep)
        hello = {"name": "w1", "piece": -1, "pid": 1, "backend": "numpy", "entries": 0, "device_bytes": 0, "gpu": ""}
        garbage = [[b"hello"], [b"hello", pickle.dumps(hello)], [b"hello", b"{}"], [b"hello", b"\xff"],
                   [b"hello", wire.hello(wire.Hello("w0", -1, 1, "numpy"))],  # another worker's name
                   [b"hello", wire.hello(wire.Hello("w1", 3, 1, "numpy"))],  # another piece
                   [b"scored"], [b"scored", b"x", b"y", b"z"], [b"scored", (1).to_bytes(8, "little"), b"short", b"{}"],
                   [b"batch", b"", b""], [b""]]  # fmt: skip
        for frames in garbage:
            rogue.send_multipart(frames)
        stranger.send_multipart([b"hello", wire.hello(wire.Hello("w0", -1, 1, "numpy"))])
        for frames in ([b"w0"], [placement.specs["w0"].identity, b"1234"], [b"w0", (0).to_bytes(8, "little")],
                       [b"\xff" * 5, b"1", b"2"]):  # fmt: skip
            beats.send_multipart(frames)
        beats.send_multipart([b"x" * 4096, b"1"])  # past the heartbeats' size: its connection ends, not counted
        expected = len(garbage) + 1 + 4
        assert _until(lambda: door.dropped >= expected), door.dropped
        for s in (rogue, stranger, beats):
            s.close()
        got = door.score(_batch([1000.0, 1001.0]), worker=0)
        assert got.reason == ["w0", "w0"] and door.failed() == 0 and door._thread.is_alive()
        assert door.dropped == expected and door.workers["w1"].pid == placement.pids["w1"]  # no hello taken
