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

from rtsearch.serve.children.child import Child, ChildGone, ready
from rtsearch.serve.children.pipes import Channel, open_channel

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
        self._child: Child | None = None
        self._channel: Channel | None = None
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
                channel = self._started()
                channel.send((fn, args))
                ok, value = channel.recv()
            except (EOFError, OSError, ChildGone) as e:
                why = self._child.why() if self._child is not None else str(e)
                self._lost()
                done.set_exception(ChildGone(f"{self.name}: the process is gone ({why})"))
                continue
            if ok:
                done.set_result(value)
            else:
                done.set_exception(value)

    def _started(self) -> Channel:
        """The child's channel, the child started (again) when there is none."""
        if self._channel is None:
            self._child = Child(self.name, _serve, fork=True, nice=self.nice)
            self._channel = open_channel(self._child, START_S)
        return self._channel

    def _lost(self) -> None:
        if self._channel is not None:
            self._channel.close()
        if self._child is not None:
            self._child.stop(1.0)
        self._child = self._channel = None

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

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
        if self._child is not None:
            self._child.stop(5.0 if finished else 0.0)  # a call still waited for ends with the child
        if self._thread.ident is not None:
            self._thread.join(5.0)
        return finished


def _serve(conn: socket.socket) -> None:
    """The child's main: run each call it is sent, send back ``(True, result)`` or ``(False, exception)``."""
    ready(conn)
    channel = Channel(conn)
    while True:
        try:
            fn, args = channel.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[bool, Any] = (True, fn(*args))
        except Exception as e:  # the caller's future raises it
            reply = (False, e)
        try:
            channel.send(reply)
        except OSError:
            return  # the parent is gone
        except Exception as e:  # it does not pickle (nothing was written)
            channel.send((False, RuntimeError(f"{type(reply[1]).__name__} could not be sent back: {e}")))
