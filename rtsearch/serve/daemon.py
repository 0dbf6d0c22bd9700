"""The daemon: intake → micro-batcher → engine workers → publish, and the runs in between.

asyncio only at the edges. The event loop receives and decodes (`Intake`) and
queues MS2 spectra in the `MicroBatcher`; engine worker threads take batches
from it when the batcher says they should go, score them with the same
`Engine` as the offline search, turn them into results with running q-values
(`LiveRun`) and publish them on the results socket themselves: a spectrum
crosses threads once, and the loop never waits on the GPU. Batcher, runs and
results socket are shared under one lock, held for bookkeeping and publishing,
never while scoring. Each worker owns a CUDA stream (`Backend.bind_worker`), so
with two workers two micro-batches are in flight and one's copies overlap the
other's scoring. MQTT and run ends are handed back to the loop. The workers' half of
the class (threads, warm-up, refits, GC) is `rtsearch.serve.workers.WorkerLoop`.

Every MS2 spectrum received is answered exactly once: scored
(``identified``/``unidentified``), ``shed`` when the batcher is full or
shutdown ran out of time, ``invalid`` when malformed but naming a run and scan.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from rtsearch import wire
from rtsearch.config import ServeConfig, mqtt_address
from rtsearch.errors import EndpointError
from rtsearch.scoring.database.engine import SearchEngine, concat_batches
from rtsearch.search.live import LiveRun, RunSummary
from rtsearch.serve.batching import BatchPolicy, EngineTimeModel, MicroBatcher
from rtsearch.serve.chunks import Received, SpectraChunk
from rtsearch.serve.intake import Intake
from rtsearch.serve.metrics import DaemonMetrics
from rtsearch.serve.publish import MqttPublisher, ZmqResults, write_run_results
from rtsearch.serve.workers import WorkerLoop, finish_run, single_threaded_blas
from rtsearch.types import ResultStatus, Spectrum

log = logging.getLogger(__name__)

# The engine releases the GIL at every device synchronization and must win it back from a busy event
# loop each time; CPython hands it over only every switch interval (default 5 ms), so a batch with a
# few hundred synchronizations could wait far longer than it computes. A short interval bounds that.
LIVE_Q_REFRESH = 0.01  # running q-values read off a curve at most 1 % of the run old (`RunningFdr`)
GIL_SWITCH_S = float(os.environ.get("RTSEARCH_GIL_SWITCH_S", "0.0001"))
INTAKE_STOP_S = 5.0  # at shutdown, how long the intake process may take to hand over what it read


@dataclass(eq=False)
class RunState:
    live: LiveRun
    outstanding: int = 0  # received MS2 spectra not yet answered
    ending: bool = False
    finishing: bool = False
    expected: int | None = None
    ms1: int = 0


@dataclass(slots=True)
class Job:
    """One MS2 spectrum between intake and its result, and the run (segment) it belongs to."""

    spectrum: Spectrum
    sent_ns: int
    received_ns: int  # wall clock, for the wire
    received_mono: int  # monotonic, for latency
    budget_ns: int
    state: RunState


@dataclass
class Endpoints:
    """Where the daemon actually listens (ports resolved when 0 or ``*`` was asked for)."""

    spectra: str = ""
    results: str = ""
    metrics_port: int = 0


@dataclass
class Finished:
    """A finalized run: its summary and results file."""

    summary: RunSummary
    path: Path
    expected: int | None = None


class Daemon(WorkerLoop):
    """``await Daemon(engine, cfg).run(stop)`` serves until ``stop`` is set, then shuts down cleanly."""

    def __init__(
        self,
        engine: SearchEngine,
        cfg: ServeConfig,
        *,
        metrics: DaemonMetrics | None = None,
        on_run_finished: Callable[[Finished], None] | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.engine = engine
        self.cfg = cfg
        self.metrics = metrics or DaemonMetrics()
        self.on_run_finished = on_run_finished
        self.clock = clock
        self.model = EngineTimeModel()
        policy = BatchPolicy(max_batch=cfg.max_batch, max_queue=cfg.max_queue, linger_ms=cfg.linger_ms)
        self.batcher: MicroBatcher[Job] = MicroBatcher(policy, self.model, clock)
        self.endpoints = Endpoints()
        self.ready = asyncio.Event()
        self.finished: list[Finished] = []
        self.mqtt: MqttPublisher | None = None
        self._runs: dict[str, RunState] = {}
        self._draining: list[RunState] = []  # ended, still being answered, while a same-named run is open
        self._parts: dict[str, int] = {}  # results files written per run name (a reopened run gets .partN)
        # one lock for what the loop and the workers share: batcher, runs, results socket (re-entrant:
        # an answer can end a run, which takes it again)
        self._cv = threading.Condition(threading.RLock())
        self._in_flight = 0
        self._closing = False  # intake closed: workers drain the batcher, then stop
        self._abandoned = False  # shutdown bound passed: late batches are not published
        self._workers: list[threading.Thread] = []
        # live refits are seconds of NumPy at most; in a thread they would hold the GIL against the
        # engine and the loop (p99 latency), so they run in a process of their own
        self._fitter = concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn"), initializer=single_threaded_blas
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._out: ZmqResults | None = None

    # ---------------------------------------------------------------- lifecycle

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; then answer what is in flight, write results, return."""
        cfg = self.cfg
        backend = self.engine.backend
        self._loop = asyncio.get_running_loop()
        single_threaded_blas()
        sync_ctx = zmq.Context()
        http = None
        # the loop thread waits for the GIL behind busy workers for up to this long (default 5 ms)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)
        try:
            await self._start_workers()
            try:
                http, self.endpoints.metrics_port = self.metrics.serve(cfg.metrics_port, cfg.metrics_host)
            except OSError as e:
                raise EndpointError(f"metrics port {cfg.metrics_host}:{cfg.metrics_port}: {e.strerror or e}; "
                                    "choose another with --metrics-port (0: any free port)") from None
            self.metrics.describe(
                backend=backend.name, device=backend.device, instrument=cfg.instrument,
                budget_s=cfg.budget_ms / 1e3, mqtt=bool(cfg.mqtt), peptides=self.engine.entries,
                gpu_bytes=backend.memory_used_bytes, searching=self.engine.searching,
            )  # fmt: skip
            try:
                self._out = ZmqResults(sync_ctx, cfg.results)
            except zmq.ZMQError as e:
                raise EndpointError(f"results endpoint {cfg.results}: {e}") from None
            self.endpoints.results = self._out.endpoint
            async with contextlib.AsyncExitStack() as stack:
                if cfg.mqtt:
                    host, port = mqtt_address(cfg.mqtt)
                    self.mqtt = await stack.enter_async_context(
                        MqttPublisher(
                            host, port, instrument=cfg.instrument, queue_size=cfg.mqtt_queue,
                            on_drop=self.metrics.mqtt_dropped.inc, on_connected=self.metrics.mqtt_connected.set,
                        )  # fmt: skip
                    )
                # raises EndpointError when the endpoint cannot be used
                intake = await stack.enter_async_context(Intake(cfg.spectra, mode=cfg.spectra_mode))
                self.endpoints.spectra = intake.endpoint
                ingest = asyncio.create_task(self._ingest(intake), name="ingest")
                self.metrics.ready.set(1)
                self.ready.set()
                log.info("ready: spectra %s (%s), results %s, metrics :%s", intake.endpoint, cfg.spectra_mode,
                         self._out.endpoint, self.endpoints.metrics_port)  # fmt: skip
                stopper = asyncio.create_task(stop.wait())
                await asyncio.wait({stopper, ingest}, return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                if ingest.done() and ingest.exception():
                    log.error("ingest task failed", exc_info=ingest.exception())
                await self._shutdown(intake, ingest)
        finally:
            gc.enable()
            sys.setswitchinterval(switch)
            self.metrics.ready.set(0)
            with self._cv:
                self._closing = self._abandoned = True
                self._cv.notify_all()
                if self._out is not None:
                    self._out.close()
            sync_ctx.destroy(linger=1000)
            if http is not None:
                http.shutdown()
                http.server_close()
            self._fitter.shutdown(wait=False, cancel_futures=True)

    async def _shutdown(self, intake: Intake, ingest: asyncio.Task[None]) -> None:
        log.info("shutting down: intake closed, answering %d waiting and %d batches in flight",
                 len(self.batcher), self._in_flight)  # fmt: skip
        self.metrics.ready.set(0)
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
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        bound = self.cfg.shutdown_timeout_s
        deadline = time.monotonic() + bound
        while any(w.is_alive() for w in self._workers) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        if any(w.is_alive() for w in self._workers):
            with self._cv:
                self._abandoned = True
                left = self.batcher.drain()
                log.warning("shutdown bound of %.0f s reached: %d spectra shed unscored, %d batches abandoned",
                            bound, len(left), self._in_flight)  # fmt: skip
                self._shed(left, "shutdown", "daemon shutting down before it could be scored")
        await asyncio.sleep(0)  # run ends the workers handed to the loop
        for state in [*self._runs.values(), *self._draining]:
            state.ending = True
            self._maybe_finish(state)
        # run files are written even when scoring overran: wait for them (bounded again)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(bound):
                while self._tasks:
                    await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self.mqtt is not None:
            await self.mqtt.flush(2.0)

    # ---------------------------------------------------------------- intake

    async def _ingest(self, intake: Intake) -> None:
        async for items in intake:
            with self._cv:
                for item in items:
                    if isinstance(item, SpectraChunk):
                        self._handle_spectra(item)
                    else:
                        self._handle(item)
                self.metrics.queue_depth.set(len(self.batcher))
                self._cv.notify()

    def _handle_spectra(self, chunk: SpectraChunk) -> None:
        """Count a chunk's spectra and queue its MS2 ones (the lock is held)."""
        states = [self._state(name) for name in chunk.runs]  # in order of first appearance
        default, add, shed = self.cfg.budget_ms, self.batcher.add, []
        levels: dict[int, int] = {}
        for r, sp, sent, wall, mono, budget in chunk.rows():
            levels[sp.ms_level] = levels.get(sp.ms_level, 0) + 1
            state = states[r]
            if sp.ms_level < 2:
                state.ms1 += 1
                continue
            if budget != budget:  # NaN: the header gave none
                budget = default
            job = Job(sp, sent, wall, mono, int(budget * 1e6), state)
            state.outstanding += 1
            if not add(job, mass=sp.precursor_mz, budget_ms=budget, arrived_ns=mono):
                shed.append(job)
        for level, count in levels.items():
            self.metrics.received(level).inc(count)
        if shed:
            self._shed(shed, "queue_full", f"overload: {len(self.batcher)} spectra already waiting")

    def _handle(self, rec: Received) -> None:
        """A control message or a malformed one (spectra come in chunks: `_handle_spectra`)."""
        msg = rec.message
        if isinstance(msg, wire.Invalid):
            self.metrics.invalid.labels(reason=msg.code).inc()
            log.debug("invalid message: %s", msg.reason)
            if msg.answerable:
                assert msg.run is not None and msg.scan is not None
                state = self._state(msg.run)
                state.outstanding += 1
                res = state.live.add_unscored(ResultStatus.INVALID, [msg.scan], [float("nan")], [msg.reason])
                self._answer_invalid(res[0], state, rec)
        elif isinstance(msg, wire.RunStart):
            if msg.run in self._runs and not self._runs[msg.run].ending:
                log.warning("run.start for run %r, which is already open: continuing it", msg.run)
            else:
                self._state(msg.run, announced=True)
        elif isinstance(msg, wire.RunEnd):
            current = self._runs.get(msg.run)
            if current is not None and current.ending:
                log.warning("run %r: a second run.end, ignored", msg.run)
                return
            state = self._state(msg.run)
            state.ending, state.expected = True, msg.n_spectra
            self._maybe_finish(state)

    def _state(self, run: str, *, announced: bool = False) -> RunState:
        """The open run ``run``; a new one if none is open or the last one got its ``run.end``."""
        state = self._runs.get(run)
        if state is not None and state.ending:
            # run.end came and its spectra are still being answered: what arrives now is a new segment
            log.info("run %r: reopened after its run.end", run)
            self._draining.append(state)
            state = None
            announced = True
        if state is None:
            if not announced:
                log.info("run %r: first message without run.start, opening it", run)
            live = self.engine.new_run(run, refits="deferred", q_refresh=LIVE_Q_REFRESH)
            state = self._runs[run] = RunState(live)
            self.metrics.runs_open.set(len(self._runs) + len(self._draining))
        return state

    # ---------------------------------------------------------------- answers (the lock is held)

    def _shed(self, jobs: list[Job], code: str, reason: str) -> None:
        self.metrics.shed.labels(reason=code).inc(len(jobs))
        self._unscored(jobs, ResultStatus.SHED, reason)

    def _unscored(self, jobs: list[Job], status: ResultStatus, reason: str) -> None:
        by_state: dict[int, list[Job]] = {}
        for j in jobs:
            by_state.setdefault(id(j.state), []).append(j)
        for js in by_state.values():
            live = js[0].state.live
            results = live.add_unscored(
                status, [j.spectrum.scan for j in js], [j.spectrum.precursor_mz for j in js], [reason] * len(js)
            )
            self._answer(list(zip(results, js, strict=True)))

    def _answer(self, pairs: Sequence[tuple[dict[str, Any], Job]]) -> None:
        """Stamp, send on ZeroMQ (and MQTT when identified) and count: the one exit of every MS2 answer.

        Called with the lock held, from a worker or the loop. Counted per call, not per
        result (a batch's latencies in one histogram update); the latency clock is read
        after the last send, so no result's latency is under-reported.
        """
        if self._abandoned and threading.current_thread() in self._workers:
            return  # shutdown gave up on this batch; the results socket may be closed
        assert self._out is not None and self._loop is not None
        send, body_of, wall = self._out.send_result, wire.result_body, time.time_ns
        identified = ResultStatus.IDENTIFIED.value
        received = np.fromiter((job.received_mono for _, job in pairs), dtype=np.int64, count=len(pairs))
        budget = np.fromiter((job.budget_ns for _, job in pairs), dtype=np.int64, count=len(pairs))
        psms: list[tuple[str, bytes]] = []
        by_status: dict[str, int] = {}
        per_run: dict[int, list[Any]] = {}  # id(state) -> [state, results, identified]
        for res, job in pairs:
            res["sent_ns"], res["received_ns"], res["published_ns"] = job.sent_ns, job.received_ns, wall()
            body = body_of(res)
            send(body)
            status = res["status"]
            by_status[status] = by_status.get(status, 0) + 1
            counts = per_run.get(id(job.state))
            if counts is None:
                counts = per_run[id(job.state)] = [job.state, 0, 0]
            counts[1] += 1
            if status == identified:
                psms.append((res["run"], body))
                counts[2] += 1
        ended: list[RunState] = []
        for state, n, _ in per_run.values():
            state.outstanding -= n
            if state.ending and state.outstanding == 0:
                ended.append(state)
        elapsed = self.clock() - received
        m = self.metrics
        m.latency.observe_many(elapsed / 1e9)
        missed = int(np.count_nonzero(elapsed > budget))
        if missed:
            m.deadline_missed.inc(missed)
        for status, count in by_status.items():
            m.result(status).inc(count)
        if by_status.get(identified):
            m.identifications.inc(by_status[identified])
        for state, n, k in per_run.values():
            m.run_answered(self.cfg.instrument, state.live.name, n, k, state.live.fdr.threshold())
        if psms and self.mqtt is not None:
            self._loop.call_soon_threadsafe(self._mqtt_psms, psms)
        for state in ended:
            self._loop.call_soon_threadsafe(self._maybe_finish, state)

    def _mqtt_psms(self, psms: list[tuple[str, bytes]]) -> None:
        if self.mqtt is not None:
            for run, payload in psms:
                self.mqtt.psm(run, payload)

    def _answer_invalid(self, res: dict[str, Any], state: RunState, rec: Received) -> None:
        """Answer a malformed message that names its run and scan (status ``invalid``)."""
        assert self._out is not None
        sent = rec.message.sent_ns if isinstance(rec.message, wire.Invalid) else None
        res["sent_ns"], res["received_ns"], res["published_ns"] = sent, rec.wall_ns, time.time_ns()
        self._out.send_result(wire.result_body(res))
        elapsed = self.clock() - rec.mono_ns
        m = self.metrics
        m.result(res["status"]).inc()
        m.run_answered(self.cfg.instrument, state.live.name, 1, 0, state.live.fdr.threshold())
        m.latency.observe(elapsed / 1e9)
        if elapsed > self.cfg.budget_ms * 1e6:
            m.deadline_missed.inc()
        state.outstanding -= 1
        if state.ending and state.outstanding == 0:
            self._maybe_finish(state)

    # ---------------------------------------------------------------- runs

    def _maybe_finish(self, state: RunState) -> None:
        if not state.ending or state.outstanding > 0 or state.finishing:
            return
        state.finishing = True
        name = state.live.name
        with self._cv:
            if self._runs.get(name) is state:
                del self._runs[name]
            elif state in self._draining:
                self._draining.remove(state)
        self.metrics.runs_open.set(len(self._runs) + len(self._draining))
        self._track(self._finish(state))

    async def _finalize(self, live: LiveRun, part: int) -> tuple[RunSummary, Path]:
        """The run's final FDR and results file: in the refit process when the index (or library) has a
        folder there."""
        target = (self.cfg.results_dir, live.name, self.cfg.results_format, part)
        reload = self.engine.reload()
        if reload is not None and live.table.batches:
            batch = await asyncio.to_thread(concat_batches, live.table.batches)
            try:
                return await asyncio.wrap_future(
                    self._fitter.submit(finish_run, reload, batch, live.name, dict(live.by_status), target)
                )
            except Exception as e:  # the pool is gone (shutdown, a crash) or the child failed: do it here
                log.warning("run %r: finishing in the refit process failed (%s: %s); finishing here", live.name,
                            type(e).__name__, e)  # fmt: skip
        table, summary = await asyncio.to_thread(live.finish)
        return summary, await asyncio.to_thread(write_run_results, table, *target)

    def _track(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, state: RunState) -> None:
        live = state.live
        if state.expected is not None and state.expected != live.answered + state.ms1:
            log.warning("run %r: run.end announced %d spectra, received %d MS2 + %d MS1", live.name,
                        state.expected, live.answered, state.ms1)  # fmt: skip
        part = self._parts[live.name] = self._parts.get(live.name, 0) + 1
        summary, path = await self._finalize(live, part)
        if not any(s.live.name == live.name for s in [*self._runs.values(), *self._draining]):
            self.metrics.run_closed(self.cfg.instrument, live.name)
        done = Finished(summary, path, state.expected)
        self.finished.append(done)
        self.metrics.runs_finished.inc()
        log.info("run %r finished: %d spectra, %d PSMs at 1%% FDR, results in %s", live.name, summary.spectra,
                 summary.psms_at_1pct, path)  # fmt: skip
        if self.mqtt is not None:
            self.mqtt.summary(live.name, {**summary.as_dict(), "results_file": str(path)})
        if self.on_run_finished is not None:
            self.on_run_finished(done)
