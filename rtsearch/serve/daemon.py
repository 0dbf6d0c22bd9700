"""The daemon: intake → micro-batcher → engine workers → publisher, and the runs in between.

`Daemon` is the composition root: it builds the parts, wires them together and
runs their lifecycle; each part guards its own state.

- `Intake` (a process of its own) reads and decodes the spectra socket and hands
  the event loop columnar chunks; the loop opens runs in the `RunBook` and queues
  MS2 spectra as `Job`\\ s in the `WorkerPool`'s batcher (shed at once when it is full).
- `WorkerPool` threads take micro-batches when the batcher says they should go, score
  them on the `SearchTarget` (the offline search's), add running q-values (`LiveRun`,
  under each run's lock: journaled) and call `Daemon._answer`: the `Publisher` stamps and sends,
  the metrics record, the run book counts, then every `Output` is told (MQTT, elution events:
  `rtsearch.serve.outputs`, built from the configuration).
- A run done (its ``run.end`` came and every spectrum is answered) is finished on the
  loop: final FDR and results file in the `Refitter`'s process, then the outputs are told.

asyncio only at the edges; the loop never waits on the GPU. Every MS2 spectrum
received is answered exactly once: scored (``identified``/``unidentified``),
``shed`` when the batcher is full or shutdown ran out of time, ``invalid`` when
malformed but naming a run and scan.

A part that fails is never silent (`Daemon._supervise`): an output restarts what stopped (MQTT) or fails; when the
intake process exits or an engine thread stops, readiness drops, the daemon shuts down as on SIGTERM
(answering and writing what it has) and `run` raises `ServiceError`, so the process exits non-zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import zmq

from rtsearch.config import BackendName, ServeConfig
from rtsearch.errors import EndpointError, ServiceError
from rtsearch.protocol import wire
from rtsearch.search.target import SearchTarget
from rtsearch.serve.children.child import ready
from rtsearch.serve.children.runtime import freeze_heap, gil_switch_s, single_threaded_blas
from rtsearch.serve.engine.admission import Advice, arrival_times
from rtsearch.serve.engine.jobs import INT_COLUMNS, Jobs, Stamps, jobs_of_chunk
from rtsearch.serve.engine.workers import WorkerPool
from rtsearch.serve.executors.engine_process import scores_in_process
from rtsearch.serve.intake.chunks import CHUNK_MAX, FLOAT_COLUMNS, Received, ShedChunk, SpectraChunk, budgets_ns, merged
from rtsearch.serve.intake.door import default_intakes
from rtsearch.serve.intake.intake import Intake, Lane
from rtsearch.serve.intake.intake_process import Shedding
from rtsearch.serve.observe.metrics import DaemonMetrics
from rtsearch.serve.observe.stats import Answered, Ready, RunAnswered, Runs, Shed
from rtsearch.serve.observe.stats import Received as ReceivedStats
from rtsearch.serve.outputs import Output, OutputContext
from rtsearch.serve.outputs.kinds import outputs_for
from rtsearch.serve.outputs.publish import Answer, Publisher, unscored
from rtsearch.serve.runs.finish import Finished, RunEnds
from rtsearch.serve.runs.refits import Refitter
from rtsearch.serve.runs.runs import RunBook, note_scans
from rtsearch.serve.runs.shed_book import ShedBook
from rtsearch.types import ResultStatus

log = logging.getLogger(__name__)
_RUN, _LEVEL, _SCAN, _MONO = (INT_COLUMNS.index(c) for c in ("run", "ms_level", "scan", "mono_ns"))
_PREC = FLOAT_COLUMNS.index("precursor_mz")

SUPERVISE_S = 0.2  # how often the parts are checked
INTAKE_STOP_S = 5.0  # at shutdown, how long the intake process may take to hand over what it read
SETTLE_S = 0.5  # several intakes: a run.end without n_spectra ends its run this long after its last message
ABANDON_GRACE_S = 5.0  # after the shutdown bound, how long batches already scored may take to be answered
# at a stop, the open runs' files get at least this long to be written, whatever the shutdown bound left (a file not
# written stays in its journal for the next start; a bound of 0 on a busy machine left every run to the next start)
FINISH_AT_STOP_S = 10.0
OUTPUT_DRAIN_S = 2.0  # at a stop, after the run files: each output's time to send what it queued


@dataclass
class Endpoints:
    """Where the daemon actually listens (ports resolved when 0 or ``*`` was asked for)."""

    spectra: str = ""
    results: str = ""
    metrics_port: int = 0


class Daemon:
    """``await Daemon(target, cfg).run(stop)`` serves until ``stop`` is set, then shuts down cleanly."""

    def __init__(
        self, target: SearchTarget, cfg: ServeConfig, *, metrics: DaemonMetrics | None = None,
        on_run_finished: Callable[[Finished], None] | None = None, clock: Callable[[], int] = time.monotonic_ns,
        cluster_backend: BackendName | None = None, lane: Lane | None = None,
    ) -> None:  # fmt: skip
        """``cluster_backend``: where ``[serve] cluster`` workers score (default: ``target``'s backend). ``lane``: this
        daemon is a lane of the lanes' front (`rtsearch.serve.lanes`): fed by its intake processes, in no order."""
        self.target, self.cfg = target, cfg
        self.metrics = metrics or DaemonMetrics()
        self.on_run_finished = on_run_finished
        self.clock = clock
        self.endpoints = Endpoints()
        self.ready = asyncio.Event()
        self.outputs: list[Output] = outputs_for(cfg)  # told of answers, events and finished runs
        self.refitter = Refitter()
        self.intakes = len(lane.pipes) if lane else cfg.intakes or default_intakes()
        self.lane = lane  # earlier journals are lane 0's to finish
        self.ends = RunEnds(target, cfg, refitter=self.refitter, record=self.metrics.record,
                            on_finished=self._on_finished, recover_journals=not lane or lane.index == 0,
                            lock=lane is None)  # fmt: skip
        self.runs = RunBook(self.ends.new_run, max_open=cfg.max_open_runs, idle_s=cfg.run_idle_s,
                            settle_s=0.0 if self.intakes == 1 and lane is None else SETTLE_S, clock=clock)  # fmt: skip
        self.ends.runs = self.runs
        self.sheds = ShedBook(self.runs, self.ends.maybe_finish)  # door-shed spectra, booked when their lock is free
        self.pool = WorkerPool(target, cfg, answer=self._answer, refitter=self.refitter, record=self.metrics.record,
                               clock=clock, cluster_backend=cluster_backend, share=lane.share if lane else None)
        self.metrics.executors.source = self.pool.executor_stats
        self.publisher: Publisher | None = None
        self.intake: Intake | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._known_runs = -1  # runs open as last recorded by `_on_spectra`
        self._failure: str | None = None  # why a part failed (then the daemon stops and `run` raises)
        self._failed = asyncio.Event()

    @property
    def finished(self) -> list[Finished]:  # the runs finished so far (results file written), in order
        return self.ends.finished

    def _on_finished(self, done: Finished) -> None:
        for out in self.outputs:
            out.on_run_finished(done)
        if self.on_run_finished is not None:
            self.on_run_finished(done)

    # ---------------------------------------------------------------- lifecycle

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; then answer what is in flight, write results, return."""
        cfg, backend = self.cfg, self.target.backend
        self._loop = asyncio.get_running_loop()
        single_threaded_blas()
        sync_ctx = zmq.Context()
        http = None  # the metrics server, when this started it (`rtsearch serve` starts it before loading the target)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(gil_switch_s(engine_in_process=scores_in_process(self.target, cfg.engine)))  # runtime.py
        try:
            await self.ends.open()  # results folder checked and locked; an earlier daemon's journals queued
            await asyncio.gather(asyncio.wrap_future(self.refitter.start()), self.pool.start())
            freeze_heap()
            http = None if self.metrics.server else self.metrics.serve(cfg.metrics_port, cfg.metrics_host)
            self.endpoints.metrics_port = self.metrics.server.port  # type: ignore[union-attr]
            self.metrics.describe(
                backend=backend.name, device=backend.device, instrument=cfg.instrument,
                budget_s=cfg.budget_ms / 1e3, mqtt=bool(cfg.mqtt), peptides=self.target.entries,
                gpu_bytes=backend.memory_used_bytes, searching=self.target.kind,
            )  # fmt: skip
            try:
                self.publisher = Publisher(sync_ctx, cfg.results, publishers=cfg.publishers, clock=self.clock,
                                           inner=self.lane.results if self.lane else None)  # fmt: skip
                self.publisher.encode_psms = any(out.wants_psms for out in self.outputs)
            except zmq.ZMQError as e:
                raise EndpointError(f"results endpoint {cfg.results}: {e}") from None
            self.endpoints.results = self.publisher.endpoint
            async with contextlib.AsyncExitStack() as stack:
                context = OutputContext(cfg, backend.name, self.publisher.inner, self.metrics.record, self._loop,
                                        self._event)  # fmt: skip
                for out in self.outputs:  # closed in reverse, after the intake
                    await out.start(context)
                    stack.push_async_callback(out.aclose)
                # raises EndpointError when the endpoint cannot be used
                self.pool.advice = Advice(self.lane.advice if self.lane else None, intakes=self.intakes)
                shedding = Shedding(self.publisher.inner, self.pool.advice.shared, cfg.budget_ms)
                keep_ms1 = any(out.keeps_ms1 for out in self.outputs)
                intake = self.intake = await stack.enter_async_context(Intake(cfg.spectra, mode=cfg.spectra_mode,
                    intakes=self.intakes, shedding=shedding, keep_ms1=keep_ms1, lane=self.lane))  # fmt: skip
                self.endpoints.spectra = intake.endpoint
                ingest = asyncio.create_task(self._ingest(intake), name="ingest")
                idle = asyncio.create_task(self._end_idle_runs(), name="idle runs")
                supervise = asyncio.create_task(self._supervise(), name="supervise")
                self.metrics.record(Ready(True))
                self.ready.set()
                if self.lane is not None and self.lane.link is not None:
                    ready(self.lane.link)  # the lanes' front waits for it (`rtsearch.serve.lanes`)
                log.info("%s: spectra %s (%s, %d intake processes), results %s, metrics :%s", "ready" if not self.lane
                         else f"lane {self.lane.index} up", intake.endpoint, cfg.spectra_mode, self.intakes,
                         self.publisher.endpoint, self.endpoints.metrics_port)  # fmt: skip
                stopper, failed = asyncio.create_task(stop.wait()), asyncio.create_task(self._failed.wait())
                await asyncio.wait({stopper, failed, ingest}, return_when=asyncio.FIRST_COMPLETED)
                for task in (stopper, failed, idle, supervise):
                    task.cancel()
                if ingest.done() and not stop.is_set() and (self.lane is None or ingest.exception()):
                    error = ingest.exception()
                    self._fail(f"intake stopped: {type(error).__name__}: {error}" if error else "intake stopped")
                await self._shutdown(intake, ingest)
            if self._failure is not None:
                raise ServiceError(f"{self._failure}; shut down after answering what was received")
        finally:
            gc.enable()
            sys.setswitchinterval(switch)
            self.metrics.record(Ready(False))
            self.pool.abandon()
            if self.publisher is not None:
                self.publisher.close()
            self.ends.close()  # runs not finished keep their journal: the next start finishes them
            sync_ctx.destroy(linger=1000)
            if http is not None:
                http.close()
                self.metrics.server = None
            self.refitter.shutdown()
            self.ends.release()

    def _fail(self, why: str) -> None:
        """A part failed: not ready from now on, and the daemon shuts down (`run` raises `ServiceError`)."""
        if self._failure is None:
            log.error("%s: shutting down", why)
            self._failure = why
            self.metrics.health.set(failure=why)
        self.metrics.record(Ready(False))
        self._failed.set()

    async def _supervise(self) -> None:
        """Check the parts: restart the MQTT publisher, fail on a stopped engine thread, intake process or door;
        finish the runs that time completed."""
        while True:
            await asyncio.sleep(SUPERVISE_S)
            for state in self.runs.settled():
                self.ends.maybe_finish(state)
            # an intake process that dies while the others still hand over items is noticed here, not by the iteration
            if self.intake is not None and not self.intake.alive():
                self._fail("an intake process or the door (the spectra socket's proxy) stopped")
            if failed := self.pool.failed():
                self._fail(f"{failed} engine worker thread(s) stopped")
            if self.publisher is not None and (failed := self.publisher.failed()):
                self._fail(f"{failed} publisher process(es) stopped")
            if why := self.ends.failure():
                self._fail(why)
            for out in self.outputs:
                if why := out.check():
                    self._fail(f"output {out.name}: {why}")

    async def _shutdown(self, intake: Intake, ingest: asyncio.Task[None]) -> None:
        log.info("shutting down: intake closed, answering %d waiting and %d batches in flight",
                 self.pool.waiting, self.pool.in_flight)  # fmt: skip
        self.metrics.record(Ready(False))
        if not ingest.done():
            # the intake process stops reading; what it had read still comes in and is answered
            intake.stop()
            try:
                async with asyncio.timeout(INTAKE_STOP_S):
                    await ingest
            except TimeoutError:
                log.warning("intake did not close within %.0f s", INTAKE_STOP_S)
                ingest.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ingest
        self.pool.close()
        bound = self.cfg.shutdown_timeout_s
        if not await self.pool.join(bound):
            in_flight = self.pool.in_flight
            left = self.pool.abandon()
            log.warning("shutdown bound of %.0f s reached: %d spectra (%d batches being scored among them) "
                        "answered shed, unscored", bound, len(left) if left else 0, in_flight)  # fmt: skip
            if left:
                self._shed(left, "shutdown", "daemon shutting down before it could be scored")
            await self.pool.join(ABANDON_GRACE_S)  # batches past scoring are being answered
        if left := self.pool.abandon():  # a worker that stopped left its batch: answered, not lost
            log.warning("%d spectra of stopped workers answered shed", len(left))
            self._shed(left, "shutdown", "daemon shutting down before it could be scored")
        await asyncio.sleep(0)  # run ends the workers handed to the loop
        self.sheds.book(wait=True)
        for state in self.runs.ending_all():
            self.ends.maybe_finish(state)
        await self.ends.wait(max(bound, FINISH_AT_STOP_S))  # run files written even when scoring overran
        for out in self.outputs:
            await out.drain(OUTPUT_DRAIN_S)

    # ---------------------------------------------------------------- intake (the loop)

    async def _ingest(self, intake: Intake) -> None:
        async for items in intake:
            for item in merged(items, CHUNK_MAX):  # chunks queued behind a busy loop: taken as one
                if isinstance(item, SpectraChunk):
                    self._on_spectra(item)
                elif isinstance(item, ShedChunk):
                    self._on_shed(item)
                else:
                    self._on_message(item)
            for state in self.runs.take_ended():  # ended by the book to make room
                self.ends.maybe_finish(state)

    async def _end_idle_runs(self) -> None:
        """Every so often, end the runs that received nothing for ``run_idle_s``."""
        while True:
            await asyncio.sleep(min(self.cfg.run_idle_s / 4, 30.0))
            self.runs.idle()
            for state in self.runs.take_ended():
                self.ends.maybe_finish(state)
            self.metrics.record(Runs(len(self.runs)))

    def _on_spectra(self, chunk: SpectraChunk) -> None:
        """Count a chunk's spectra, open their runs and queue the MS2 ones (shed when the queue is full).

        Column work a chunk, no object a spectrum: the chunk's MS2 rows become `Jobs` as they are.
        """
        states = [self.runs.state(name) for name in chunk.runs]  # in order of first appearance
        level = chunk.ints[:, _LEVEL]
        jobs = jobs_of_chunk(chunk, states, self.cfg.budget_ms)
        by_level = np.bincount(level)
        levels = {lv: int(k) for lv, k in enumerate(by_level.tolist()) if k}
        if len(states) == 1:  # the usual chunk: one run
            ms2, ms1 = [len(jobs)], [len(level) - len(jobs)]
        else:
            ms2 = np.bincount(jobs.run, minlength=len(states)).tolist()
            ms1 = np.bincount(chunk.ints[level < 2, _RUN], minlength=len(states)).tolist()
        for r, state in enumerate(states):
            note_scans(state, jobs.spectra.scan[jobs.run == r] if len(states) > 1 else jobs.spectra.scan)
        self.runs.received(zip(states, ms2, ms1, strict=True))
        for out in self.outputs:
            out.on_spectra(chunk)
        self.metrics.record(ReceivedStats(spectra=levels, arrival=arrival_times(chunk.ints, self.clock())))
        if (n_runs := len(self.runs)) != self._known_runs:  # a run opened (or ended): the gauge follows
            self._known_runs = n_runs
            self.metrics.record(Runs(n_runs))
        if len(jobs):
            for refused, code, reason in self.pool.enqueue(jobs):
                self._shed(refused, code, reason)

    def _on_shed(self, shed: ShedChunk) -> None:
        """Spectra an intake process answers ``shed`` at the door: booked in their runs — journaled — without waiting
        on a run's lock (`ShedBook`), then the intake process is told to publish them; and the metrics."""
        chunk = shed.chunk
        states = [self.runs.state(name) for name in chunk.runs]
        run = chunk.ints[:, _RUN]
        groups = [(state, np.flatnonzero(run == r)) for r, state in enumerate(states)]
        groups = [(state, rows) for state, rows in groups if len(rows)]
        self.runs.received([(state, len(rows), 0) for state, rows in groups])
        answered: list[RunAnswered] = []
        assert self.intake is not None
        for k, (state, rows) in enumerate(groups):
            scans = chunk.ints[rows, _SCAN]
            note_scans(state, scans)
            last = k == len(groups) - 1  # reports are booked in order: its last group booked, all of it is
            self.sheds.add(state, scans, chunk.floats[rows, _PREC], chunk.ids_at(rows), shed.reason,
                           functools.partial(self.intake.ack, shed.source, shed.seq) if last else None)  # fmt: skip
            answered.append(RunAnswered(state.name, len(rows), 0, state.threshold))
        latency = self.clock() - chunk.ints[:, _MONO]  # to the hand-off (booked, or queued to be): as `Publisher`'s
        missed = int(np.count_nonzero(latency > budgets_ns(chunk.floats, self.cfg.budget_ms)))
        levels = {lv: int(k) for lv, k in enumerate(np.bincount(chunk.ints[:, _LEVEL]).tolist()) if k}
        n = len(chunk)
        self.metrics.record(ReceivedStats(spectra=levels), Shed("door", n),
                            Answered(latency / 1e9, missed, {"shed": n}, answered))

    def _on_message(self, rec: Received) -> None:
        """A control message or a malformed one (spectra come in chunks: `_on_spectra`)."""
        msg = rec.message
        if isinstance(msg, wire.Invalid):
            self.metrics.record(ReceivedStats(invalid={msg.code: 1}))
            log.debug("invalid message: %s", msg.reason)
            if msg.answerable:
                assert msg.run is not None and msg.scan is not None
                state = self.runs.state(msg.run)
                self.runs.malformed(state)
                with state.lock:
                    res = state.live.add_unscored(ResultStatus.INVALID, [msg.scan], [float("nan")], [msg.reason])
                stamps = Stamps.one(msg.sent_ns, rec.wall_ns, rec.mono_ns, int(self.cfg.budget_ms * 1e6),
                                    batched=rec.batched)  # fmt: skip
                self._answer([(state, res, stamps)])
        elif isinstance(msg, wire.RunStart):
            self.runs.start(msg.run)
        elif isinstance(msg, wire.RunEnd):
            done = self.runs.end(msg.run, msg.n_spectra)
            if done is not None:
                self.ends.maybe_finish(done)
        self.metrics.record(Runs(len(self.runs)))

    # ---------------------------------------------------------------- answers (any thread)

    def _answer(self, answers: list[Answer]) -> None:
        """Publish ``answers``, record them, count them against their runs; end the runs they complete."""
        assert self.publisher is not None and self._loop is not None
        sent = self.publisher.publish(answers)
        if sent is None:
            return  # shut down: the socket is closed
        for out in self.outputs:
            out.on_answers(answers, sent)
        self.metrics.record(sent.stats)
        for state in self.runs.answered(sent.per_run):
            self._loop.call_soon_threadsafe(self.ends.maybe_finish, state)

    def _shed(self, jobs: Jobs, code: str, reason: str) -> None:
        """Answer ``jobs`` ``shed`` with ``reason`` (``code``: the metric's label)."""
        self.metrics.record(Shed(code, len(jobs)))
        self._answer(unscored(jobs, ResultStatus.SHED, reason))

    def _event(self, kind: str, run: str, body: bytes) -> None:
        """An output's event (an elution apex, say; any thread), to every output."""
        for out in self.outputs:
            out.on_event(kind, run, body)
