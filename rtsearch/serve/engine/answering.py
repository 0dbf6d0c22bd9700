"""The daemon's results thread: scored batches' answers built, handed on and counted, in the order scored.

The engine threads (`rtsearch.serve.engine.workers`) hand each scored batch over (`Answering.hand`), up to
`FINISH_DEPTH` batches ahead of this thread (then they wait), or, when it is idle and no spectrum waits, answer the
batch themselves (`Answering.try_here`: a hand-over costs a lone spectrum more). The thread takes the batches that
queued behind the one it takes with it: their answers are built in one call a run for all of them
(`rtsearch.serve.outputs.publish.scored_answers`: a run's call costs ~0.25 ms whatever its size, and with four runs
sharing each batch that was the thread's limit: the since-deleted probe answers_probe.py, docs/history/RESULTS.md
2026-11-27). The answers go to ``answer`` (the daemon's: publish, count, end runs), due live refits to the refit
process; Python's cyclic GC runs when the thread goes idle (`collect_garbage`). A failure building the results answers
the batches ``unidentified`` with its reason: nothing is lost.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable

from rtsearch.matches import ScoredBatch
from rtsearch.serve.children.runtime import collect_garbage, name_os_thread
from rtsearch.serve.engine.jobs import Jobs
from rtsearch.serve.observe.stats import Scored
from rtsearch.serve.outputs.publish import Answer, scored_answers, unscored
from rtsearch.serve.runs.refits import Refitter
from rtsearch.types import ResultStatus

log = logging.getLogger(__name__)

FINISH_DEPTH = 2  # scored batches waiting for the results thread at most (then the engine threads wait)

Finished = tuple[Jobs, ScoredBatch, float, float]  # a scored batch: its jobs, its matches, started and scored (s)


class Answering:
    """The results thread and its queue; see the module docstring.

    ``idle()``: whether no spectrum waits for an engine (the GC runs then); ``observe(items, t_start, t_end)``:
    the batches answered, when answering them began and when it ended (perf_counter s), for the pool's models.
    """

    def __init__(self, *, answer: Callable[[list[Answer]], None], refitter: Refitter, record: Callable[..., None],
                 idle: Callable[[], bool], observe: Callable[[list[Finished], float, float], None],
                 ) -> None:  # fmt: skip
        self.answer, self.refitter, self.record, self.idle, self.observe = answer, refitter, record, idle, observe
        self._queue: queue.Queue[Finished | None] = queue.Queue(FINISH_DEPTH)
        self._lock = threading.Lock()  # held while answers are built and sent, by whichever thread
        self.thread = threading.Thread(target=self._loop, name="results", daemon=True)

    def hand(self, item: Finished) -> None:
        """Queue a scored batch for the thread (waits while it is `FINISH_DEPTH` batches behind)."""
        self._queue.put(item)

    def try_here(self, item: Finished) -> bool:
        """Answer ``item`` in the calling thread if the results thread is idle and holds nothing (whether it did)."""
        if not self._queue.empty() or not self._lock.acquire(blocking=False):
            return False
        try:
            self._finish([item])
        finally:
            self._lock.release()
        return True

    def stop(self) -> None:
        """The thread stops after what it was handed."""
        self._queue.put(None)

    def _loop(self) -> None:
        name_os_thread()
        stop = False
        while not stop:
            items = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while items[-1] is not None and len(items) <= FINISH_DEPTH:
                    items.append(self._queue.get_nowait())
            stop = items[-1] is None
            if done := [item for item in items if item is not None]:
                with self._lock:
                    self._finish(done)

    def _finish(self, items: list[Finished]) -> None:
        """Answer scored batches together (a failure building their results answers them all the same)."""
        t2 = time.perf_counter()
        try:
            answers = scored_answers([(jobs, scored) for jobs, scored, _, _ in items])
        except Exception as e:  # a bug past scoring: the batches are still answered, the thread goes on
            log.exception("building the results of %d spectra failed", sum(len(item[0]) for item in items))
            for jobs, *_ in items:
                self.answer(unscored(jobs, ResultStatus.UNIDENTIFIED, f"internal error: {type(e).__name__}: {e}"[:300]))
            return
        t3 = time.perf_counter()
        self.answer(answers)
        self.refitter.refit([state for state, _, _ in answers])
        t4 = time.perf_counter()
        collect_garbage(idle=self.idle() and self._queue.empty())
        t5 = time.perf_counter()
        self.observe(items, t2, t5)
        share = 1 / len(items)  # the stages done for all of them, shared out
        for _, _, t0, t1 in items:
            stages = {"score": t1 - t0, "lock": t2 - t1, "results": (t3 - t2) * share, "publish": (t4 - t3) * share,
                      "gc": (t5 - t4) * share}  # fmt: skip
            self.record(Scored(t1 - t0, stages))
