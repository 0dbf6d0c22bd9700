"""Elution events live: the daemon's MS1 scans and identified precursors through an `ElutionTracker`.

With ``[serve] elution`` (``rtsearch serve --elution``) the intake keeps MS1 peaks and the daemon has this output
(`rtsearch.serve.outputs`): it is handed every MS1 scan (`on_spectra`), every precursor answered with a match
(`on_answers`: identified or not, the run's q-values still moving; with its MS2's retention time, so that however
late it is answered it is placed where it was taken) and every run's finish (`on_run_finished`: every spectrum of
it answered, so no follow starts after its trace was let go; not its ``run.end``, which a busy daemon reads before
it answers the run's last spectra) — each a put on a bounded queue, never a wait (a full queue drops the item and
counts it: MS2 answers never wait for elution). Its thread
hands what is queued, a list at a time, to the tracker (`rtsearch.signal.live`; smoothing on the daemon's backend)
in a process of its own (`rtsearch.serve.outputs.elution_process`: its Python holds no GIL of the daemon's) and
publishes each event it returns: on the results socket as an ``elution`` message (2 frames: topic ``elution``, UTF-8
JSON: ``v``, ``run``, ``scan`` of the MS2, ``precursor_mz``, ``charge``, ``event`` (``apex`` | ``end``), ``apex_rt``,
``apex_intensity``, ``area`` (``end`` only, else 0), ``rt`` (the MS1 scan that showed it); docs/protocol.md), to
the other outputs as an ``elution`` event (MQTT: ``<base>/<run>/elution``), and as `Elution` stats for the metrics.
A tracker process that dies is started again by the thread (what it followed and the list it held are lost, counted
as dropped); a thread that stops fails the daemon (`ElutionOutput.check`, the supervisor's look).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson
import zmq

from rtsearch.protocol.topics import ELUTION
from rtsearch.serve.children.runtime import name_os_thread
from rtsearch.serve.intake.chunks import FLOAT_COLUMNS, INT_COLUMNS, SpectraChunk
from rtsearch.serve.observe.stats import Elution
from rtsearch.serve.outputs import Output, OutputContext
from rtsearch.serve.outputs.elution_process import TrackerGone, TrackerProcess
from rtsearch.serve.outputs.publish import Answer, Published
from rtsearch.serve.runs.finish import Finished
from rtsearch.signal.live import ElutionEvent

log = logging.getLogger(__name__)

_RUN, _LEVEL = INT_COLUMNS.index("run"), INT_COLUMNS.index("ms_level")
_RT = FLOAT_COLUMNS.index("rt")
QUEUE_ITEMS = 100_000  # scans, watches and run ends waiting for the thread at most (then dropped, counted)
BATCH_ITEMS = 256  # items handed to the tracker's process at once at most


class ElutionOutput(Output):
    """The tracker's thread and what it publishes; see the module docstring."""

    name = "elution"
    keeps_ms1 = True

    def __init__(self) -> None:
        self.record: Callable[..., None] = lambda *stats: None
        self._event: Callable[[str, str, bytes], None] = lambda kind, run, body: None
        self._queue: queue.Queue[tuple[Any, ...] | None] = queue.Queue(QUEUE_ITEMS)
        self._results = ""
        self._push: zmq.Socket[bytes] | None = None  # the thread's own
        self._abort = threading.Event()
        self.dropped = 0
        self._queued = self._tracked = 0  # items put, and items the tracker answered
        self._count = threading.Lock()  # puts come from the loop and the results thread
        self._tracker: TrackerProcess | None = None
        self._backend = "numpy"
        self._failure: str | None = None  # why the thread stopped before its close
        self._closed = False
        self.restarts = 0  # tracker processes started again after one was lost
        self._thread = threading.Thread(target=self._run, name="rtsearch-elution", daemon=True)

    async def start(self, ctx: OutputContext) -> None:
        """Start the tracker's process (not on the loop; raises `TrackerGone` if it cannot) and the thread."""
        self.record, self._event, self._results = ctx.record, ctx.event, ctx.results
        self._backend = ctx.backend
        self._tracker = await asyncio.to_thread(lambda: TrackerProcess(ctx.backend).start())
        self._thread.start()

    def check(self) -> str | None:
        """A lost tracker process is started again by the thread itself; a thread that stopped fails the daemon."""
        started = self._thread.ident is not None
        if self._failure is None and not self._closed and started and not self._thread.is_alive():
            self._failure = "the elution thread stopped"
        return self._failure

    def on_spectra(self, chunk: SpectraChunk) -> None:
        if (chunk.ints[:, _LEVEL] < 2).any():
            self.scans_of(chunk)

    def on_run_finished(self, done: Finished) -> None:
        self.end_run(done.summary.run)

    def on_answers(self, answers: Sequence[Answer], published: Published) -> None:
        self.answers(answers)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def _put(self, item: tuple[Any, ...]) -> None:
        try:
            with self._count:
                self._queue.put_nowait(item)
                self._queued += 1
        except queue.Full:
            self.dropped += 1
            self.record(Elution(dropped=1))

    def scan(self, run: str, rt: float, mz: np.ndarray, intensity: np.ndarray) -> None:
        self._put(("scan", run, rt, mz, intensity))

    def watch(self, run: str, scans: np.ndarray, mz: np.ndarray, charge: np.ndarray, rt: np.ndarray) -> None:
        """Precursors to follow; ``rt``: their MS2s' retention times, seconds (NaN: at the last MS1 scan)."""
        self._put(("watch", run, scans, mz, charge, rt))

    def scans_of(self, chunk: SpectraChunk) -> None:
        """The MS1 scans of an intake chunk (kept with their peaks: `rtsearch.serve.intake.chunks`)."""
        level, offsets = chunk.ints[:, _LEVEL], chunk.offsets
        for row in np.flatnonzero(level < 2).tolist():
            a, b = int(offsets[row]), int(offsets[row + 1])
            self.scan(chunk.runs[int(chunk.ints[row, _RUN])], float(chunk.floats[row, _RT]), chunk.mz[a:b],
                      chunk.intensity[a:b])  # fmt: skip

    def answers(self, answers: Sequence[Answer]) -> None:
        """The precursors of the daemon's answers that matched (with a charge), to follow."""
        for _, results, _ in answers:
            ok = np.asarray(results.matched, bool) & (np.asarray(results.charge) > 0)
            if ok.any():
                rt = np.full(len(results), np.nan) if results.rt is None else np.asarray(results.rt, np.float64)
                self.watch(results.run, np.asarray(results.scan)[ok], np.asarray(results.precursor_mz)[ok],
                           np.asarray(results.charge)[ok], rt[ok])  # fmt: skip

    def idle(self) -> bool:
        """Whether everything put so far has been tracked (and its events published)."""
        return self._tracked == self._queued

    def end_run(self, run: str) -> None:
        self._put(("end", run))

    def close(self, timeout_s: float = 5.0) -> None:
        """Finish what is queued within ``timeout_s``; then stop (what is left is dropped, said in the log)."""
        self._closed = True
        if not self._thread.is_alive():
            return
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("elution: %d items not processed within %.0f s of shutdown: dropped", self._queue.qsize(),
                        timeout_s)  # fmt: skip
            self._abort.set()
            self._thread.join(timeout_s)

    def _run(self) -> None:
        name_os_thread("elution")
        self._push = zmq.Context.instance().socket(zmq.PUSH)
        self._push.setsockopt(zmq.LINGER, 1000)
        self._push.connect(self._results)
        try:
            self._serve()
        except BaseException as e:
            self._failure = f"the elution thread failed: {type(e).__name__}: {e}"
            raise
        finally:
            self._push.close()
            if self._tracker is not None:
                self._tracker.close()

    def _serve(self) -> None:
        stop = False
        while not stop and not self._abort.is_set():
            items = [self._queue.get()]
            while len(items) < BATCH_ITEMS and not self._queue.empty():
                items.append(self._queue.get_nowait())
            if items[-1] is None:
                stop = True
                items.pop()
            if not items:
                continue
            assert self._tracker is not None
            try:
                events, followed = self._tracker.call(items)  # type: ignore[arg-type]
            except TrackerGone as e:
                # its follows and the scans it kept are lost, and these items with them (counted); the next ones
                # go to a new tracker process
                log.error("elution: %s; its %d items and its follows lost: starting it again", e, len(items))
                self.dropped += len(items)
                self.record(Elution(dropped=len(items)))
                self._tracker.close()
                self._tracker = None
                self._tracker = TrackerProcess(self._backend).start()  # (one that cannot start fails the thread)
                self.restarts += 1
                self._tracked += len(items)
                continue
            if events:
                self._emit(events)
            self.record(Elution(followed=followed))
            self._tracked += len(items)

    def _emit(self, events: list[ElutionEvent]) -> None:
        counts: dict[str, int] = {}
        assert self._push is not None
        for e in events:
            body = orjson.dumps({"v": 1, **e.as_dict()})
            self._push.send_multipart([ELUTION, body])
            self._event(ELUTION.decode(), e.run, body)
            counts[e.kind] = counts.get(e.kind, 0) + 1
        self.record(Elution(events=counts))
