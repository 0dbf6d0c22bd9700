"""The daemon's engine workers: threads that take micro-batches, score them and hand on the results.

The `WorkerPool` owns the `MicroBatcher` and the count of batches in flight, under its own condition (the loop
queues spectra, the workers take batches). Each engine thread binds its own CUDA stream (`Backend.bind_worker`) and
holds one executor (`rtsearch.serve.executors`: the daemon's own thread; on a GPU by default an engine process of
its own, off the daemon's GIL; or, with ``[serve] cluster``, the cluster's front door — threads by lane, a replicate
worker or partition's batch spread over them all, taken just in time: `rtsearch.serve.engine.pacing`). It warms up,
then loops: wait until the batcher releases a batch (threads after the first: a large one, `OVERLAP_MIN`), score it
and hand it to the results thread (`rtsearch.serve.engine.answering`: answers built, published and counted in the
order scored), or, when that thread is idle and no spectrum waits, answer the batch itself. An engine failure
answers its batch ``unidentified`` with its error as the reason. Spectra that no batch could answer in time are
given up (`rtsearch.serve.engine.expiry`) unless an idle engine probes. At the shutdown bound, `abandon` hands back
what waits and what is being scored (the daemon answers it ``shed``); a batch scored after that is dropped (it was
answered)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from rtsearch.cluster.serve import ClusterScorer, open_cluster
from rtsearch.cluster.share import Share
from rtsearch.config import BackendName, ServeConfig
from rtsearch.config.environment import tuning
from rtsearch.errors import EngineError
from rtsearch.search.target import SearchTarget
from rtsearch.serve.children.runtime import name_os_thread
from rtsearch.serve.engine import pacing
from rtsearch.serve.engine.admission import Advice
from rtsearch.serve.engine.answering import Answering, Finished
from rtsearch.serve.engine.batching import BatchPolicy, EngineTimeModel, MicroBatcher, expiry_slack_ms
from rtsearch.serve.engine.expiry import Expiry
from rtsearch.serve.engine.jobs import Jobs
from rtsearch.serve.engine.pending import Claim, Pending
from rtsearch.serve.executors import Executor, ExecutorStats, open_executor
from rtsearch.serve.executors.engine_process import EngineGone, Scorer
from rtsearch.serve.observe.stats import Queue, Stat, Taken
from rtsearch.serve.outputs.publish import Answer, unscored
from rtsearch.serve.runs.refits import Refitter
from rtsearch.types import ResultStatus

log = logging.getLogger(__name__)

SLOW_BATCH_S = 0.5  # slower engine batches are logged (the ``slow_batch_s`` knob)
WARM_UP_SIZES = (1, 7, 64, 512)  # batch sizes each worker scores before intake opens (and max_batch)
OVERLAP_MIN = 1024  # waiting spectra that let engines after the first take one (``overlap_min``)

Answers = Callable[[list[Answer]], None]
Refusal = tuple[Jobs, str, str]  # spectra refused at enqueue, the shed metric's reason code, the answer's reason


class WorkerPool(Expiry):
    """Engine threads over one `MicroBatcher`; see the module docstring."""

    def __init__(
        self, target: SearchTarget, cfg: ServeConfig, *, answer: Answers, refitter: Refitter,
        record: Callable[..., None], clock: Callable[[], int] = time.monotonic_ns,
        cluster_backend: BackendName | None = None, share: Share | None = None,
    ) -> None:  # fmt: skip
        """``share``: a lane's of lanes sharing the cluster's workers (`rtsearch.cluster.share`)."""
        self.target, self.cfg, self.answer, self.refitter = target, cfg, answer, refitter
        self.share = share
        self.record: Callable[..., None] = record  # `DaemonMetrics.record`
        self.clock = clock
        self.model = EngineTimeModel()
        self._cv = threading.Condition()  # guards the batcher, the model and the counts below
        self.batcher = MicroBatcher(BatchPolicy(max_batch=cfg.max_batch, max_queue=cfg.max_queue,
                                                linger_ms=cfg.linger_ms, slack_ms=expiry_slack_ms()), self.model, clock)
        self._pending, self._in_flight = Pending(), 0  # the jobs the batcher's handles stand for; batches scoring
        self._scoring: dict[int, Claim] = {}  # batches taken and not yet claimed back, by number
        self._taken, self._busy = 0, dict[int, int]()  # batches taken; those being scored: when each is due (ns)
        self.advice: Advice | None = None  # the wait told to the intake processes (`rtsearch.serve.engine.admission`)
        self._closing = False  # intake closed: workers drain the batcher, then stop
        self._abandoned = False  # shutdown bound passed: late batches are not answered
        self._threads: list[threading.Thread] = []  # the engine threads
        self._executors: list[Executor] = []  # theirs, once open (`executor_stats`)
        self.results = Answering(answer=answer, refitter=refitter, record=record, idle=lambda: not self.waiting,
                                 observe=self._observe_answered)  # the results thread  # fmt: skip
        self._engines_left = 0  # engine threads still taking batches (the last one out stops the results thread)
        self._expiry = threading.Thread(target=self._expiry_loop, name="expiry", daemon=True)
        self._expiry_wake = threading.Event()  # spectra came in, or the pool stops: the expiry thread looks again
        self._expiry_due: int | None = None  # when the expiry thread looks next (None: when woken)
        self._advised_ns = 0  # the wait `_advise` said last (ns; the metrics' `Queue`)
        self._takers = 0  # engine threads waiting in `_take` for a batch of any size (`enqueue` leaves them the late)
        self._given_up: list[Claim] = []  # spectra an engine thread gave up, for the expiry thread to answer
        self.cluster: ClusterScorer | None = None  # ``[serve] cluster``: remote workers score (rtsearch/cluster/)
        self.cluster_backend = cluster_backend or target.backend.name  # where the cluster (else the target) computes
        self._warmed = False  # an engine thread warmed up (with a cluster, the first one only)
        self._scored_at = clock()  # when a batch last left an engine (`_probing`)
        self._lanes = pacing.Lanes(1, pacing.lead_ns(), worth=pacing.worth_rule())  # a cluster's batches, by lane
        self._patience, self._behind = pacing.patience(), pacing.give_up_behind()
        knobs = tuning()  # (`SLOW_BATCH_S`, `OVERLAP_MIN` unless set)
        self._slow_s = SLOW_BATCH_S if knobs.slow_batch_s is None else knobs.slow_batch_s
        self._overlap_min = OVERLAP_MIN if knobs.overlap_min is None else knobs.overlap_min

    # ---------------------------------------------------------------- the loop's side

    async def start(self) -> None:
        """Start the engine threads; each warms up before this returns."""
        warm: list[asyncio.Future[None]] = []
        threads = self.cfg.workers
        if self.cfg.cluster:  # replicate: depth threads a worker, one batch each; partition: depth, each batch on all
            self.cluster = await asyncio.to_thread(open_cluster, self.target, self.cfg, self.cluster_backend,
                                                    self.record, self.share)  # fmt: skip
            lanes = self._lanes.lanes = self.batcher.lanes = self.cfg.cluster if self.cluster.mode == "replicate" else 1
            # lanes sharing the workers: the lanes' batches in flight a worker add up (`pacing.CLUSTER_DEPTH` in all)
            share = getattr(self.cluster, "share", None)  # (a stand-in scorer in tests has none)
            depth = pacing.depth(share.lanes if share else None)
            threads = max(threads, depth * lanes)
        self._engines_left = threads
        self.results.thread.start()
        self._expiry.start()
        for k in range(threads):
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            w = threading.Thread(target=self._worker, args=(done, k), name=f"engine_{k}", daemon=True)
            self._threads.append(w)
            w.start()
            warm.append(asyncio.wrap_future(done))
        await asyncio.gather(*warm)

    def enqueue(self, jobs: Jobs) -> list[Refusal]:
        """Queue ``jobs``; those refused, to answer ``shed``: predicted late (`MicroBatcher`), beyond ``max_queue``."""
        refused: list[Refusal] = []
        deadline = jobs.stamps.received_mono + jobs.stamps.budget_ns
        with self._cv:
            busy, headroom = self._busy_until(), self.batcher.headroom_ns()
            late = None  # none late when the last newcomer (the latest) is in time for the earliest deadline
            if len(jobs) and self.batcher.predicted_last(len(jobs), busy_until_ns=busy) + headroom > deadline.min():
                late = (done := self.batcher.predicted_done(len(jobs), busy_until_ns=busy)) + headroom > deadline
            # an idle engine takes what comes whatever the model says (a model too pessimistic once would shed all)
            if late is not None and late.any() and (self._busy or len(self.batcher)):
                wait_ms = (int(done[0]) - self.clock()) / 1e6
                refused.append((jobs.take(np.flatnonzero(late)), "predicted_late",
                                f"overload: answering it would take {wait_ms:.0f} ms, beyond its budget"))  # fmt: skip
                jobs = jobs.take(np.flatnonzero(~late))
            handles = self._pending.add(jobs)
            k = self.batcher.add(handles, mass=jobs.spectra.precursor_mz, budget_ms=jobs.stamps.budget_ns / 1e6,
                                 arrived_ns=jobs.stamps.received_mono)  # fmt: skip
            if k < len(handles):
                refused.append((self._pending.take(handles[k:]), "queue_full",
                                f"overload: {len(self.batcher)} spectra already waiting"))  # fmt: skip
            waiting, in_flight = len(self.batcher), self._in_flight
            self._advise()
            self._cv.notify_all()  # the first engine thread must wake, whichever else waits
            # the expiry thread looks again only when a newcomer is due before what it waits for (usually only
            # the first spectrum into an empty queue: the others have later deadlines)
            due = self.batcher.expire_at()
            # an engine thread idle here takes them (giving up the late on its way, waking the expiry thread for what
            # it leaves waiting): waking that too cost each lone spectrum ~0.1 ms (docs/history/RESULTS.md, 2026-11-27)
            wake = due is not None and (self._expiry_due is None or due < self._expiry_due) and \
                not (self._takers and self.cluster is None)  # fmt: skip
        if wake:
            self._expiry_wake.set()
        self.record(Queue(waiting, in_flight, self._advised_ns / 1e9, self.batcher.model_terms()))
        return refused

    def _advise(self) -> None:
        """(Under the condition.) When the engine is busy or spectra wait, how long until a newcomer would be
        answered; 0 when it is idle, so spectra reach it and correct the model. The event loop's own lag behind
        the intake pipes is left out: it grows with the chunks of shed spectra it books, and counting it would
        shed more, lag more, and starve the engine (measured, docs/history/RESULTS.md)."""
        if self.advice is None:
            return
        wait = free = 0
        if self._busy or len(self.batcher):
            now = self.clock()
            start = max(now, self._busy_until())  # the newcomer's batch starts; until then the wait passes with time
            wait = self.batcher.predicted_last(1, busy_until_ns=start) + self.batcher.headroom_ns() - now
            free = start - now
        model = self.model  # each spectrum queued after: its share of a full batch, over the lanes scoring at once
        per = (model.per_item_s + model.fixed_s / self.cfg.max_batch) / self.batcher.lanes
        self.advice.set_wait(wait, int(per * 1e9), elapsing_ns=free)
        self._advised_ns = wait

    def _busy_until(self) -> int:
        """When the next engine thread is free (clock ns; now if one is; those after the first count with
        `OVERLAP_MIN` waiting only); with a cluster, when a batch taken now could start on a worker (`pacing`)."""
        if self.cluster is not None:
            return self._lanes.earliest(self._busy, self.clock())
        engines = len(self._threads) if len(self.batcher) >= self._overlap_min else 1
        if len(self._busy) < engines or not self._busy:
            return self.clock()
        return min(self._busy.values())

    @property
    def waiting(self) -> int:
        with self._cv:
            return len(self.batcher)

    @property
    def in_flight(self) -> int:
        with self._cv:
            return self._in_flight

    def close(self) -> None:  # intake is closed: score what waits, then stop
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._expiry_wake.set()

    async def join(self, timeout_s: float) -> bool:  # whether the workers stopped within ``timeout_s``
        deadline = time.monotonic() + timeout_s
        while self.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return not self.alive()

    def alive(self) -> bool:  # whether any engine thread, the results thread or the expiry thread runs
        return any(w.is_alive() for w in (*self._threads, self.results.thread, self._expiry))

    def failed(self) -> int:
        """Threads that stopped while the pool was serving (0 while all run, or when it was closed): its own, and its
        cluster door's (`ClusterScorer.failed`)."""
        with self._cv:
            closing = self._closing
        if closing:
            return 0
        door = getattr(self.cluster, "failed", None)  # (a stand-in scorer in tests has none)
        own = sum(not w.is_alive() for w in (*self._threads, self.results.thread, self._expiry))
        return own + (door() if door else 0)

    def abandon(self) -> Jobs | None:
        """Stop now: what waits and what is being scored comes back, to be answered unscored (``None``: nothing)."""
        self._expiry_wake.set()
        with self._cv:
            self._closing = self._abandoned = True
            self._cv.notify_all()
            waiting = self.batcher.drain()
            left = [self._pending.take(waiting)] if len(waiting) else []
            left.extend(claim.jobs() for claim in (*self._scoring.values(), *self._given_up))
            self._scoring.clear()
            self._given_up.clear()
            return Jobs.concat(left) if left else None

    # ---------------------------------------------------------------- the workers' side

    def _observe(self, size: int, seconds: float) -> None:
        with self._cv:
            self.model.observe(size, seconds)

    def _worker(self, warm: concurrent.futures.Future[None], k: int) -> None:
        """Engine thread ``k``: warm up, then take batches, score them and hand on their results."""
        name_os_thread()
        executor = None
        try:
            self.target.backend.bind_worker()
            executor = open_executor(self.target, self.cfg.engine, threading.current_thread().name, self.cluster)
            with self._cv:  # the cluster's workers warmed up themselves: one thread times its batches, alone
                warming, self._warmed = self.cluster is None or not self._warmed, True
            if warming:
                executor.warm_up(self.target, sorted({*WARM_UP_SIZES, self.cfg.max_batch}), self._observe,
                                 backend=self.cluster_backend)  # fmt: skip
        except BaseException as e:
            warm.set_exception(e)
            self._engine_out(executor)
            return
        warm.set_result(None)
        try:
            # beside the first, an engine thread of its own process overlaps large batches only (`_take`)
            overlap_only = k > 0 and self.cluster is None
            lane = k % self._lanes.lanes  # a cluster's: replicate, thread k scores on worker k mod N (`pacing`)
            if self.cluster is not None and self.cluster.mode == "replicate":
                executor = executor.on_worker(lane)
            with self._cv:
                self._executors.append(executor)
            while (taken := self._take(overlap_only, lane)) is not None:
                number, jobs = taken
                try:
                    self._run_batch(number, jobs, executor.score)
                finally:
                    with self._cv:
                        self._busy.pop(number, None)
                        self._advise()
        finally:
            self._engine_out(executor)

    def executor_stats(self) -> list[ExecutorStats]:
        """What each engine thread's executor scored so far (`rtsearch.serve.executors.ExecutorStats`)."""
        with self._cv:
            return [e.stats() for e in self._executors]

    def _engine_out(self, executor: Executor | None) -> None:
        """An engine thread stops (its engine process with it); the last one tells the results thread to stop after
        what it holds (and the expiry thread to stop)."""
        if executor is not None:
            executor.close()
        with self._cv:
            self._engines_left -= 1
            last = self._engines_left == 0
        if last:
            self.results.stop()
            self._expiry_wake.set()
            if self.cluster is not None:
                self.cluster.__exit__()

    def _run_batch(self, number: int, jobs: Jobs, score: Scorer) -> None:
        """Score one batch and hand it to the results thread (an engine failure answers it here; a lost engine
        process stops this thread after that, and the daemon with it)."""
        t0 = time.perf_counter()
        try:
            scored = score(jobs.spectra)
        except Exception as e:  # an engine failure answers the batch; it never loses it (an engine's or a cluster's
            bug = not isinstance(e, EngineError)  # own report says why, in a line; anything else: a traceback here)
            why = f"{type(e).__name__}: {e}" if bug else str(e)
            log.log(logging.ERROR if bug else logging.WARNING, "engine failed on %d: %s", len(jobs), why, exc_info=bug)
            if self._done(number, len(jobs), None):
                self.answer(unscored(jobs, ResultStatus.UNIDENTIFIED, f"engine error: {why}"[:300]))
            if isinstance(e, EngineGone):
                raise
            return
        t1 = time.perf_counter()
        if not self._done(number, len(jobs), t1 - t0, scored.stages):
            return  # abandoned at the shutdown bound: the daemon answered it
        if t1 - t0 > self._slow_s:
            log.warning("slow engine batch: %d spectra in %.1f ms (model predicted %.1f ms); stages %s", len(jobs),
                        (t1 - t0) * 1e3, self.model.predict(len(jobs)) * 1e3,
                        {k: round(v * 1e3, 2) for k, v in scored.stages.items()})  # fmt: skip
        # nothing else to score, the results thread idle: answered here (a hand-over costs a lone spectrum more)
        if self.waiting or not self.results.try_here((jobs, scored, t0, t1)):
            self.results.hand((jobs, scored, t0, t1))

    def _observe_answered(self, items: list[Finished], t_start: float, t_end: float) -> None:
        """Batches answered from ``t_start`` to ``t_end``: the batcher's tail (scored to answered: the wait for the
        results thread, then its work) and the results thread's pace (its work alone: `MicroBatcher.answering`)."""
        with self._cv:
            for jobs, _, _, t1 in items:
                self.batcher.tail.observe(len(jobs), t_end - t1)
            self.batcher.answering.observe(sum(len(jobs) for jobs, *_ in items), t_end - t_start)

    def _take(self, overlap_only: bool = False, lane: int = 0) -> tuple[int, Jobs] | None:
        """Wait for the next batch and its number (``None``: shutting down and nothing is left); spectra that
        cannot be answered within their budget any more are given up on the way (the expiry thread answers them).

        ``overlap_only`` (engine threads after the first): only while `OVERLAP_MIN` spectra wait. Engines overlapping
        pay for large batches (bulk replay); under lone spectra they made more, smaller batches
        (docs/history/RESULTS.md)."""
        t0 = time.perf_counter()
        with self._cv:
            self._takers += not overlap_only
            try:
                claim = self._wait_for_batch(overlap_only, lane)
            finally:
                self._takers -= not overlap_only
            if claim is None:
                return None
            self._in_flight += 1
            self._taken += 1
            number = self._taken
            self._scoring[number] = claim
            took = int(self.model.predict(len(claim)) * 1e9)
            if self.cluster is None:
                self._busy[number] = self.clock() + took
            else:  # after the batch it queues behind at its worker, if any (`pacing`)
                self._lanes.book(self._busy, number, lane, took, self.clock())
            self._advise()
            queue = Queue(len(self.batcher), self._in_flight)
            if queue.waiting and self._expiry_due is None:  # the expiry thread waits for nothing while idle
                self._expiry_wake.set()
        t1 = time.perf_counter()
        jobs = claim.jobs()
        waited = (self.clock() - jobs.stamps.received_mono) / 1e9
        self.record(Taken(len(jobs), waited, t1 - t0, time.perf_counter() - t1), queue)
        return number, jobs

    def _wait_for_batch(self, overlap_only: bool, lane: int) -> Claim | None:
        """(Under the condition.) `_take`'s wait: the next batch's claim (``None``: shutting down, nothing left)."""
        while True:
            if self._abandoned:
                return None
            if self._expire(here=False):
                continue
            if overlap_only and not self._closing and len(self.batcher) < self._overlap_min:
                self._cv.wait(0.05)  # woken by `enqueue`, or looks again
                continue
            if self.cluster is not None and not self._closing and (hold := self._lanes.hold_ns(
                    self._busy, lane, self.clock(), len(self.batcher), self.cfg.max_batch, self.model,
                    patient_until=self.batcher.aged_at(self._patience))) > 0:
                self._cv.wait(hold / 1e9)  # the lane's worker holds a batch: its next one taken just in time
                continue
            if self._behind and not self._closing and self._give_up_behind(self._lanes.free_at(self._busy, lane,
                                                                                               self.clock())):
                continue  # (`pacing.give_up_behind`; without a cluster no lane holds a batch: it starts now)
            handles = self.batcher.take(workers_free=1, now=self._closing or self._probing())
            if handles is not None:  # arrival order (whole chunks uncopied: RESULTS 2026-11-29), gathered by `_take`
                return self._pending.claim(np.sort(handles))  # outside the lock the loop queues under
            if self._closing:
                return None
            wake = self.batcher.wake_at()
            self._cv.wait(None if wake is None else max(0.0, (wake - self.clock()) / 1e9))

    def _done(self, number: int, size: int, seconds: float | None, stages: dict[str, float] | None = None) -> bool:
        """Batch ``number`` left the engine (``seconds`` it took, its ``stages``; ``None``: it failed); this worker is
        free again. Whether the batch is still this worker's to answer (not abandoned at the shutdown bound). The
        model learns the engine's time alone (less a cluster batch's wait behind its lane's own at its worker:
        `pacing.Lanes.own_wait`), not the answering after it, beside the next batch (`_observe_answered`; learnt
        into the model it was charged to every batch ahead and the door shed two thirds: docs/history/RESULTS.md,
        2026-11-27 14:40)."""
        stats: list[Stat] = []
        with self._cv:
            if seconds is not None and size:
                queued = (stages or {}).get("queued", 0.0)
                self.model.observe(size, seconds - queued * self._lanes.own_wait(number))
                if stages and "scoring" in stages:  # a cluster's: the daemon's own time a batch (`pacing.HostTime`)
                    self._lanes.host.observe(seconds, queued, stages["scoring"])
                    self.batcher.overlap_s = self._lanes.host.seconds if len(self._threads) > self._lanes.lanes else 0.0
            self._in_flight -= 1
            self._scored_at = self.clock()
            if self.cluster is not None:  # those queued behind it re-timed from its real end
                self._lanes.settle(self._busy, number, self._scored_at)
            self._cv.notify()  # another worker may be waiting on the batcher
            stats.append(Queue(len(self.batcher), self._in_flight))
            mine = self._scoring.pop(number, None) is not None
        self.record(*stats)
        return mine
