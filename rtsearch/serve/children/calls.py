"""A child that runs the calls it is sent, one at a time: the refit process's kind (`rtsearch.serve.runs.refits`).

`CallChild.submit` returns a `concurrent.futures.Future`; one thread of the parent's sends each call over the child's
channel (`rtsearch.serve.children.pipes.Channel`: the child is the daemon's own, forked for it, and the socket pair
theirs alone, so calls and results travel pickled) and waits for its result, in order. A child that dies fails the
call it was running with `ChildGone` and is started again for the next. Written here rather than taken from
`concurrent.futures.ProcessPoolExecutor` so that the refit process starts, readies and ends as every other child does
(`rtsearch.serve.children.child`), and a pool's exit handler cannot wait on a task that waits on it (a lane once
hung at exit that way).
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from rtsearch.serve.children.child import ChildGone
from rtsearch.serve.children.pipes import ChannelChild, serve_channel

T = TypeVar("T")
START_S = 60.0  # the child's start, forked by the fork server


class CallChild:
    """``CallChild("refit", nice=10).submit(fn, *args)``; see the module docstring."""

    def __init__(self, name: str, *, nice: int = 0) -> None:
        self.name, self.nice = name, nice
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = \
            queue.SimpleQueue()  # fmt: skip
        self._thread = threading.Thread(target=self._run, name=f"{name}-calls", daemon=True)
        self._lock = threading.Lock()
        self._child: ChannelChild | None = None
        self._closed = False

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """``fn(*args)`` run in the child, after what was submitted before (raises `RuntimeError` once shut down)."""
        done: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: shut down")
            if not self._thread.is_alive():
                self._thread.start()
            self._queue.put((done, fn, args))
        return done

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            done, fn, args = item
            if not done.set_running_or_notify_cancel():
                continue
            try:
                ok, value = self._started().call((fn, args))
            except ChildGone as e:
                self._lost()
                done.set_exception(e)
                continue
            if ok:
                done.set_result(value)
            else:
                done.set_exception(value)

    def _started(self) -> ChannelChild:
        """The child, started (again) when there is none."""
        if self._child is None:  # (kept before it starts: one that cannot start is stopped by `_lost`)
            self._child = ChannelChild(self.name, _serve, gone=ChildGone, timeout_s=START_S, fork=True, nice=self.nice)
            self._child.start()
        return self._child

    def _lost(self) -> None:
        if self._child is not None:
            self._child.close(1.0)
        self._child = None

    def shutdown(self, timeout_s: float) -> bool:
        """Cancel what waits, let the call that runs finish within ``timeout_s``, then stop the child (killed if it
        has not ended); whether the running call finished in time."""
        with self._lock:
            self._closed = True
            with contextlib.suppress(queue.Empty):
                while (item := self._queue.get_nowait()) is not None:
                    item[0].cancel()
            self._queue.put(None)
        finished = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
            finished = not self._thread.is_alive()
        if self._child is not None:  # a call still waited for ends with the child (its channel left to that call)
            self._child.child.stop(5.0 if finished else 0.0)
        if self._thread.ident is not None:
            self._thread.join(5.0)
        return finished


def _serve(conn: socket.socket) -> None:
    """The child's main: run each call it is sent, send back ``(True, result)`` or ``(False, exception)``."""
    serve_channel(conn, _call, unsendable=lambda reply, e: (False, RuntimeError(
        f"{type(reply[1]).__name__} could not be sent back: {e}")))  # fmt: skip


def _call(request: tuple[Callable[..., Any], tuple[Any, ...]]) -> tuple[bool, Any]:
    fn, args = request
    try:
        return True, fn(*args)
    except Exception as e:  # the caller's future raises it
        return False, e
