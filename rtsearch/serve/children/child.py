"""A child process of the daemon's, whatever its kind: started, ready, supervised and stopped one way.

Every process the daemon, the lanes' front or a local cluster starts — intake, engine, publisher, elution, refit,
lane, cluster worker — is a `Child`:

- **start**: spawned (a fresh interpreter: the kinds that may open CuPy) or forked by the daemon's fork server
  (``fork=True``, `rtsearch.serve.children.runtime.child_context`: intake, publisher, refit); in the child `as_child`
  leaves SIGINT/SIGTERM to the parent, ends the child with its parent, names its thread and keeps BLAS to one thread,
  then ``main(conn, *args)`` runs.
- **one channel**: a Unix socket pair whose messages are `rtsearch.serve.children.framing`'s (the parent's end is
  `Child.conn`); a request/reply kind passes large arrays through shared memory over it
  (`rtsearch.serve.children.pipes.Channel`).
- **ready handshake**: the child's first message is `READY` (``main`` calls `ready`, with what the parent should
  know: an endpoint, a backend) or `FAILED` (``main`` raised: why, in one line). `Child.wait_ready` returns the
  payload or raises `ChildGone` saying why; nothing after the handshake is read with it.
- **supervision**: `alive`, `why` (how it ended); the owner decides whether to restart it or stop.
- **stop**: `stop` closes the parent's end (a child reading it sees end of file and ends), waits, then kills.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from rtsearch.errors import ServiceError
from rtsearch.serve.children.framing import pack, read_message
from rtsearch.serve.children.runtime import child_context, name_os_thread, single_threaded_blas

log = logging.getLogger(__name__)

READY, FAILED = 3, 4  # the handshake's kinds of message (the intake's kinds number on from these)


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """SIGINT kept from a child while it starts, before its setup ignores it: a Ctrl-C in the terminal reaches every
    process of the group, and one that came while a child still imported ended it with a ``KeyboardInterrupt``
    traceback (``ForkServerProcess-1``, seen at ``rtsearch serve``). In the main thread SIGINT is ignored while the
    child starts: an ignored signal stays ignored across exec, so a spawned child begins ignoring it; a Ctrl-C in
    that instant is lost. Elsewhere (signal dispositions are the main thread's to set) it is blocked in this thread
    meanwhile. (A forked child gets the fork server's disposition, ignored: `forkserver_env`.)"""
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, old)
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class ChildGone(ServiceError):
    """A child process did not start, or is gone."""


class StartFailed(Exception):
    """Raised by a child's ``main`` before it is ready: its text is what the parent is told, as it is."""


def exit_with_parent(parent: int, every_s: float = 1.0) -> None:
    """End this process (at once, no clean-up) when the process ``parent`` is gone: no orphans.

    For the daemon's child processes: a thread waits on a pidfd of ``parent`` (readable once it has ended, whatever
    killed it, SIGKILL included; the daemon's children are forked by its fork server, so `os.getppid` is not the
    daemon), or, where there is none, asks every ``every_s`` whether it still exists.
    """

    def watch() -> None:
        try:
            fd = os.pidfd_open(parent)
        except ProcessLookupError:
            os._exit(0)
        except (OSError, AttributeError):  # no pidfd here: poll
            while _exists(parent):
                time.sleep(every_s)
            os._exit(0)
        select.select([fd], [], [])
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _exists(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's does: signal 0 is refused, not unanswered)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def as_child(parent: int, name: str | None = None, *, keep_sigterm: bool = False) -> None:
    """Set up a child process of the daemon's: SIGINT (and SIGTERM, unless ``keep_sigterm``) left to the daemon,
    ended with ``parent``, its thread named ``name``, one BLAS thread."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not keep_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    exit_with_parent(parent)
    name_os_thread(name)
    single_threaded_blas()


def ready(conn: socket.socket, payload: bytes = b"") -> None:
    """In the child: tell the parent it is ready (``payload``: what the parent's `Child.wait_ready` returns)."""
    conn.sendall(pack(READY, [payload]))


def _run(conn: socket.socket, parent: int, name: str, settings: tuple[bool, bool, int],
         main: Callable[..., None], args: tuple[Any, ...]) -> None:  # fmt: skip
    """The child's entry: set up (`as_child`), then ``main(conn, *args)``; an exception is told to the parent."""
    with_parent, keep_sigterm, nice = settings
    if with_parent:
        as_child(parent, name, keep_sigterm=keep_sigterm)
    else:  # it ends on its own when its parent's sockets close (a lane: it answers what it holds first)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice:
        os.nice(nice)
    conn.setblocking(True)
    try:
        main(conn, *args)
    except StartFailed as e:
        _tell(conn, str(e))
        raise SystemExit(1) from None
    except Exception as e:
        log.exception("%s failed", name)
        _tell(conn, f"{type(e).__name__}: {e}")
        raise SystemExit(1) from None


def _tell(conn: socket.socket, why: str) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(pack(FAILED, [why.encode()]))


def socket_pair(buffer_bytes: int = 0) -> tuple[socket.socket, socket.socket]:
    """A Unix stream socket pair, both buffers ``buffer_bytes`` each way (0: the system's): a child's channel, or a
    lane's with an intake process of the front's."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if buffer_bytes:
        for s in (ours, theirs):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)
    return ours, theirs


class Child:
    """``Child(name, main, *args).start()``: a child process running ``main(conn, *args)``; see the module docstring.

    ``fork``: forked by the fork server (else spawned); ``with_parent``: it ends the moment its parent does (else it
    ends when its sockets close); ``keep_sigterm``: SIGTERM keeps its default; ``nice``: its priority lowered by this;
    ``daemon``: multiprocessing's flag (a child that starts children of its own must not be one); ``buffer_bytes``:
    both socket buffers (0: the system's).
    """

    def __init__(
        self, name: str, main: Callable[..., None], *args: Any, fork: bool = False, with_parent: bool = True,
        keep_sigterm: bool = False, nice: int = 0, daemon: bool = True, buffer_bytes: int = 0,
    ) -> None:  # fmt: skip
        self.name = name
        self._target = (main, args, (with_parent, keep_sigterm, nice), fork, daemon, buffer_bytes)
        self.conn: socket.socket | None = None
        self.proc: Any = None

    def start(self) -> Child:
        """Start the process (`wait_ready` waits for its handshake)."""
        main, args, settings, fork, daemon, buffer_bytes = self._target
        ours, theirs = socket_pair(buffer_bytes)
        ctx = child_context() if fork else multiprocessing.get_context("spawn")
        self.proc = ctx.Process(target=_run, args=(theirs, os.getpid(), self.name, settings, main, args),
                                name=f"rtsearch-{self.name}", daemon=daemon)  # fmt: skip
        try:
            with sigint_held():
                self.proc.start()
        finally:
            theirs.close()  # the child has its own copy: its exit is our end of file
        self.conn = ours
        return self

    def wait_ready(self, timeout_s: float) -> bytes:
        """The child's `READY` payload; raises `ChildGone` when it failed, ended, or said nothing within
        ``timeout_s`` (then it is stopped)."""
        assert self.conn is not None
        self.conn.settimeout(timeout_s)
        try:
            kind, parts = read_message(self.conn)
        except TimeoutError:
            self.stop(0.0)
            raise ChildGone(f"{self.name} did not start within {timeout_s:.0f} s") from None
        except (EOFError, OSError):
            self.proc.join(5.0)
            raise ChildGone(f"{self.name} did not start ({self.why()})") from None
        finally:
            if self.conn is not None:
                self.conn.settimeout(None)
        if kind != READY:
            why = bytes(parts[0]).decode(errors="replace") if kind == FAILED and parts else f"message {kind}"
            self.stop(5.0)
            raise ChildGone(f"{self.name} did not start: {why}")
        return bytes(parts[0]) if parts else b""

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def why(self) -> str:
        """How it ended, in words (``running`` while it runs)."""
        if self.proc is None:
            return "not started"
        code = self.proc.exitcode
        if code is None:
            return "running"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for it to end on its own; whether it has."""
        if self.proc is not None:
            self.proc.join(timeout_s)
        return not self.alive()

    def kill(self) -> None:
        """End it now (SIGKILL)."""
        if self.proc is not None:
            self.proc.kill()

    def stop(self, wait_s: float = 5.0) -> None:
        """Close the parent's end, wait up to ``wait_s`` for the child to end, kill it if it has not; idempotent."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc is not None and not self.join(wait_s):
            self.proc.kill()
            self.proc.join(5.0)
