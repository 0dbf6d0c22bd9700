"""Spectra given up in time: the waiting spectra that no batch could answer within their budget any more are
answered ``shed`` before it ends, not scored late (`rtsearch.serve.engine.batching.MicroBatcher.expire`).

`Expiry` is the `rtsearch.serve.engine.workers.WorkerPool`'s side of it (a mixin: the pool's condition, batcher and
pending spectra are its own). The expiry thread gives up spectra while every engine thread is busy; an engine
thread gives up those it finds on its way to a batch and leaves their answers to the expiry thread, so that under
overload a lone engine thread keeps its GPUs scoring instead of publishing thousands of ``shed`` answers a second
(docs/history/RESULTS.md, "Where two GPUs' time goes"). While nothing is in flight (or an idle engine that has scored
nothing for a while probes) the model is not asked: only spectra past their headroom (`MicroBatcher.headroom_ns`
before their deadline: the margin and the slack) are given up, and an engine takes the rest whatever the model
predicts — a model too pessimistic once would otherwise shed all for good (a 50 Da window on NumPy: warm-up
spectra at 20 ms each, the run's at 6.6, a batch of one predicted beyond a 40 ms budget less its slack, every
spectrum given up, 16 of 400 scored, each a probe; docs/history/RESULTS.md, 2026-11-27).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from rtsearch.serve.children.runtime import name_os_thread
from rtsearch.serve.engine.batching import MicroBatcher
from rtsearch.serve.engine.pending import Claim, Pending
from rtsearch.serve.observe.stats import Shed
from rtsearch.serve.outputs.publish import unscored
from rtsearch.types import ResultStatus

PROBE_AFTER_NS = 250_000_000  # an idle engine that scored nothing for this long scores what waits (`_probing`)


class Expiry:
    """The pool's expiry (see the module docstring); the attributes below are the `WorkerPool`'s."""

    _cv: threading.Condition
    batcher: MicroBatcher
    _pending: Pending
    _busy: dict[int, int]
    _scored_at: int
    _given_up: list[Claim]
    _abandoned: bool
    _engines_left: int
    _expiry_due: int | None
    _expiry_wake: threading.Event
    clock: Callable[[], int]
    answer: Callable[..., None]
    record: Callable[..., None]

    def _advise(self) -> None:  # the pool's
        raise NotImplementedError

    def _probing(self) -> bool:
        """(Under the condition.) Whether an idle engine takes the next batch whatever the model predicts: spectra
        wait and none left an engine for `PROBE_AFTER_NS` (a model too pessimistic would shed all for good)."""
        return not self._busy and len(self.batcher) > 0 and self.clock() - self._scored_at > PROBE_AFTER_NS

    def _idle(self) -> bool:
        """(Under the condition.) Whether an engine takes what waits now whatever the model predicts: nothing is in
        flight (so too while `_probing`, which asks that first)."""
        return not self._busy

    def _expire(self, *, here: bool = True) -> bool:
        """(Under the condition.) Give up the waiting spectra that no batch could answer within their budget any
        more (`MicroBatcher.lead_ns` before it ends; while `_idle`, its headroom: the model not asked); whether
        there were any. ``here`` (the expiry thread): answer them ``shed`` now; else (an engine thread, which goes on to
        score) the expiry thread does — answering thousands a second under overload took a lone engine thread from its
        GPUs."""
        lead = self.batcher.headroom_ns() if self._idle() else self.batcher.lead_ns()
        return self._give_up(self.batcher.expire(self.clock() + lead), here=here)

    def _give_up(self, handles: np.ndarray, *, here: bool) -> bool:
        """(Under the condition.) The spectra of ``handles``, taken out of the batcher, given up: answered ``shed``
        now (``here``) or by the expiry thread; whether there were any."""
        if not len(handles):
            return False
        self._given_up.append(self._pending.claim(handles))  # gathered when answered, outside the lock
        self._advise()
        if here:
            self._answer_given_up()
        else:
            self._expiry_wake.set()
        return True

    def _give_up_behind(self, start_ns: int) -> bool:
        """(Under the condition; an engine thread about to take a batch that starts at ``start_ns``: when its
        worker is free.) Give up what that batch would answer late (`MicroBatcher.give_up_late`), for the expiry
        thread to answer; whether there were any. Not while `_idle` (the model not asked, as in `_expire`)."""
        return not self._idle() and self._give_up(self.batcher.give_up_late(start_ns), here=False)

    def _answer_given_up(self) -> None:
        """(Under the condition, released meanwhile: answering takes the runs' locks and the socket.) Answer
        ``shed`` the spectra given up so far."""
        claims, self._given_up = self._given_up, []
        self._cv.release()
        try:
            for claim in claims:
                late = claim.jobs()
                self.record(Shed("expired", len(late)))
                self.answer(unscored(late, ResultStatus.SHED, "overload: its budget would be over before it is scored"))
        finally:
            self._cv.acquire()

    def _expiry_loop(self) -> None:
        """The expiry thread: gives up waiting spectra in time while every engine thread is busy, and answers those
        the engine threads gave up."""
        name_os_thread()
        while True:
            with self._cv:  # held from the last look at what was given up to clearing the wake: none missed
                while True:
                    if self._given_up and not self._abandoned:
                        self._answer_given_up()  # (engine threads may give up more meanwhile: looked at again)
                    elif self._abandoned or self._engines_left == 0:  # stopped (or never started: warm-up failed)
                        return
                    elif not self._expire():
                        break
                due = self._expiry_due = None if self._idle() else self.batcher.expire_at()  # (a batch taken wakes it)
                self._expiry_wake.clear()
            timeout = None if due is None else max(0.0, (due - self.clock()) / 1e9)
            self._expiry_wake.wait(timeout)
