"""Sending spectra: recorded runs at their acquisition timing or a fixed rate, framed by run.start/run.end.

``pub`` mode binds an XPUB socket where the instrument's PUB would be and
waits for the daemon's subscription before sending, so nothing is lost to
ZeroMQ's slow-joiner window; ``push`` mode connects a PUSH socket to a daemon
that binds PULL (lossless: PUSH waits instead of dropping).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import zmq

from rtsearch.io.spectra import read_spectra, run_name
from rtsearch.protocol.batch import encode_spectra
from rtsearch.protocol.wire import encode_run_end, encode_run_start, encode_spectrum
from rtsearch.types import Spectrum

SendMode = Literal["pub", "push"]


class SendError(Exception):
    """The daemon could not be reached (no subscriber, no PULL peer)."""


@dataclass
class Sent:
    """What was sent: every MS2 key (run, scan) and when each message left."""

    ms2: list[tuple[str, int]] = field(default_factory=list)
    total: int = 0
    runs: list[str] = field(default_factory=list)
    first_ns: int = 0
    last_ns: int = 0


def load_run(path: str | Path, *, name: str | None = None) -> list[Spectrum]:
    """Every MS1 and MS2 spectrum of a file, in file order (renamed to ``name`` if given)."""
    spectra = list(read_spectra(path, default_charges=(), ms_levels=(1, 2)))
    if name is not None:
        spectra = [dataclasses.replace(s, run=name) for s in spectra]
    return spectra


def offsets(spectra: Sequence[Spectrum], *, speed: float | None, rate: float | None) -> list[float]:
    """Send time of each spectrum in seconds from the start: by retention time / ``speed``, or ``1/rate`` apart."""
    if rate:
        return [i / rate for i in range(len(spectra))]
    if not spectra:
        return []
    t0 = spectra[0].rt
    spd = speed or 1.0
    out, last = [], 0.0
    for s in spectra:
        t = max((s.rt - t0) / spd, last)  # never backwards, even if a file's RTs are
        out.append(t)
        last = t
    return out


class Sender:
    """A socket to the daemon's spectra endpoint; ``with Sender(...) as s: s.send(frames)``."""

    def __init__(self, endpoint: str, *, mode: SendMode = "pub", ctx: zmq.Context[Any] | None = None,
                 wait_s: float = 30.0) -> None:
        self.ctx = ctx or zmq.Context.instance()
        self.mode = mode
        if mode == "pub":
            self.socket = self.ctx.socket(zmq.XPUB)
            self.socket.setsockopt(zmq.SNDHWM, 0)
            self.socket.bind(endpoint)
            self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
            self.wait_s = wait_s
        elif mode == "push":
            self.socket = self.ctx.socket(zmq.PUSH)
            self.socket.setsockopt(zmq.SNDHWM, 0)
            # queue only to a connected daemon: with none, send waits (then fails) instead of "succeeding"
            self.socket.setsockopt(zmq.IMMEDIATE, 1)
            self.socket.setsockopt(zmq.SNDTIMEO, int(wait_s * 1000))
            self.socket.connect(endpoint)
            self.endpoint = endpoint
        else:
            raise ValueError(f"mode must be 'pub' or 'push', got {mode!r}")
        self.socket.setsockopt(zmq.LINGER, 5000)
        self._subscribed = mode == "push"

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.socket.close()

    def wait_for_subscriber(self) -> None:
        """XPUB: block until a subscription arrives (the daemon is listening)."""
        if self._subscribed:
            return
        if not self.socket.poll(int(self.wait_s * 1000), zmq.POLLIN):
            raise SendError(f"no subscriber on {self.endpoint} after {self.wait_s:.0f} s: is the daemon running "
                            "with --spectra-mode sub and this endpoint?")
        self.socket.recv()
        self._subscribed = True

    def send(self, frames: list[bytes]) -> None:
        self.wait_for_subscriber()
        try:
            self.socket.send_multipart(frames)
        except zmq.Again:
            raise SendError(f"no daemon took the message on {self.endpoint} (PUSH timed out): is it running "
                            "with --spectra-mode pull?") from None


def paced(items: Sequence[Any], times: Sequence[float]) -> Iterator[Any]:
    """Yield ``items`` at ``times`` (seconds from now); late items go at once, in order."""
    t0 = time.perf_counter()
    for item, t in zip(items, times, strict=True):
        delay = t - (time.perf_counter() - t0)
        if delay > 0.0005:
            time.sleep(delay)
        yield item


def replay(
    sender: Sender,
    runs: Iterable[tuple[str, list[Spectrum]]],
    *,
    speed: float | None = 1.0,
    rate: float | None = None,
    budget_ms: float | None = None,
    sent: Sent | None = None,
    batch: int = 1,
    window: int = 0,
    answered: Callable[[], int] | None = None,
) -> Sent:
    """Send each run framed by ``run.start``/``run.end``; returns what was sent.

    ``rate`` ``math.inf``: as fast as the daemon answers. ``batch`` > 1: up to that many consecutive
    spectra in one ``spectra`` message (`rtsearch.protocol.batch`), answered in ``batch.results`` messages, each
    sent at the time of its first spectrum. ``window`` > 0 (with ``answered``, the count of answers so
    far): at most that many MS2 spectra sent and not yet answered — a bulk sender's flow control, so
    that spectra wait here rather than be shed by a daemon whose queue they would overflow.
    """
    out = sent or Sent()
    n0 = answered() if answered is not None else 0

    def wait_for_room(k: int) -> None:
        if not window or answered is None:
            return
        while len(out.ms2) + k - (answered() - n0) > window:
            time.sleep(0.0002)

    for name, spectra in runs:
        sender.send(encode_run_start(name, source="rtsearch-sim"))
        out.runs.append(name)
        times = [0.0] * len(spectra) if rate == math.inf else offsets(spectra, speed=speed, rate=rate)
        starts = range(0, len(spectra), max(1, batch))
        for i in paced(starts, [times[i] for i in starts]):
            block = [sp if sp.run == name else dataclasses.replace(sp, run=name) for sp in spectra[i : i + batch]]
            wait_for_room(sum(sp.ms_level >= 2 for sp in block))
            now = time.time_ns()
            if batch > 1:
                sender.send(encode_spectra(name, block, sent_ns=now, budget_ms=budget_ms, answer="batch"))
            else:
                sender.send(encode_spectrum(block[0], sent_ns=now, budget_ms=budget_ms))
            out.first_ns = out.first_ns or now
            out.last_ns = now
            out.total += len(block)
            out.ms2.extend((name, sp.scan) for sp in block if sp.ms_level >= 2)
        sender.send(encode_run_end(name, len(spectra)))
    return out


def looped(paths: Sequence[str | Path], loops: int) -> Iterator[tuple[str, list[Spectrum]]]:
    """Each file ``loops`` times; passes after the first are separate runs named ``<run>.loopN``."""
    cache = {str(p): load_run(p) for p in paths}
    for k in range(loops):
        for p in paths:
            base = run_name(p)
            name = base if k == 0 else f"{base}.loop{k + 1}"
            spectra = cache[str(p)] if k == 0 else [dataclasses.replace(s, run=name) for s in cache[str(p)]]
            if k == 0 and any(s.run != base for s in spectra):
                spectra = [dataclasses.replace(s, run=base) for s in spectra]
            yield name, spectra


def synthetic(
    paths: Sequence[str | Path], *, total: int, run_size: int, prefix: str = "load"
) -> Iterator[tuple[str, list[Spectrum]]]:
    """Load beyond the recorded runs: their MS2 spectra cycled into runs of ``run_size`` with fresh scans.

    Real spectra, so the engine does real work; new run names keep the daemon's per-run
    state bounded however long the load goes on.
    """
    pool = [s for p in paths for s in load_run(p) if s.ms_level >= 2]
    if not pool:
        raise SendError("no MS2 spectra in the given files")
    made, r = 0, 0
    while made < total:
        name = f"{prefix}{r:05d}"
        n = min(run_size, total - made)
        yield name, [dataclasses.replace(pool[(made + i) % len(pool)], run=name, scan=i + 1) for i in range(n)]
        made += n
        r += 1
