"""The elution tracker's own process: MS1 scans and precursors in, elution events out, off the daemon's GIL.

The tracker's per-scan work (extracted-ion values of every followed precursor, the smoother, peak cutting) is
Python and NumPy between kernel launches; in a thread of the daemon it held the GIL that the event loop and the
results thread need, and the MS2 answers' p99 rose by 1–9 ms at 200 spectra/s (docs/history/RESULTS.md, issue 19).
Here it runs in a spawned child (`serve`, a `rtsearch.serve.children.child.Child`); the daemon's
`rtsearch.serve.outputs.elution.ElutionOutput` thread sends it lists of items over its channel and reads back what each
list made due::

    ElutionOutput thread ──Channel([("scan", run, rt, mz, intensity) | ("watch", …) | ("end", run), …])──▶ pipe
        ◀── Channel((events, followed)) ── child: ElutionTracker.add_scan / watch / end_run

Arrays pickle as their bytes (an MS1 scan of 3,000 peaks is ~48 kB). The child ends when its socket closes or the
daemon dies; an item it fails on is logged and skipped, as the thread did.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import numpy as np

from rtsearch.errors import ServiceError
from rtsearch.serve.children.pipes import ChannelChild, serve_channel
from rtsearch.signal.live import ElutionEvent, ElutionTracker

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # CuPy's first import on a fresh machine


class TrackerGone(ServiceError):
    """The tracker process is gone or could not start."""


class TrackerProcess(ChannelChild):
    """``TrackerProcess("cupy").start()``, then ``events, followed = t.call(items)`` — see the module docstring."""

    def __init__(self, backend: str) -> None:
        super().__init__("elution", serve, backend, gone=TrackerGone, timeout_s=START_TIMEOUT_S)

    def call(self, items: list[tuple[Any, ...]]) -> tuple[list[ElutionEvent], int]:
        """Items for the tracker; the events they made due, and the precursors followed now."""
        reply: tuple[list[ElutionEvent], int] = super().call(items)
        return reply


def apply(tracker: ElutionTracker, items: list[tuple[Any, ...]]) -> list[ElutionEvent]:
    """Items on the tracker in order: MS1 scans (a run's consecutive ones in one `ElutionTracker.add_scans`: a
    tracker behind catches up), precursors to follow (arrays of scans, m/z, charges, MS2 retention times), runs'
    ends."""
    events: list[ElutionEvent] = []
    k = 0
    while k < len(items):
        kind, run = items[k][0], items[k][1]
        try:
            if kind == "scan":
                j = k
                while j < len(items) and items[j][0] == "scan" and items[j][1] == run:
                    j += 1
                events += tracker.add_scans(run, [it[2:5] for it in items[k:j]])
                k = j
                continue
            if kind == "watch":
                scans, mzs, zs, rts = (np.asarray(a).tolist() for a in items[k][2:6])
                if not len(scans) == len(mzs) == len(zs) == len(rts):
                    raise ValueError(f"a watch of {len(scans)} scans, {len(mzs)} m/z, {len(zs)} charges and "
                                     f"{len(rts)} times")  # fmt: skip
                for scan, mz, z, rt in zip(scans, mzs, zs, rts, strict=True):
                    tracker.watch(run, scan, mz, z, rt)
                events += tracker.due()  # late answers: what the scans already seen show
            else:
                events += tracker.end_run(run)
        except Exception:  # a bad scan must not end tracking
            log.exception("elution tracking failed on a %s item", kind)
        k += 1
    return events


def serve(conn: socket.socket, backend: str) -> None:
    """The process's main function: track until the socket closes."""
    from rtsearch.scoring.backend import get_backend

    tracker = ElutionTracker(xp=get_backend(backend).xp)  # type: ignore[arg-type]
    serve_channel(conn, lambda items: (apply(tracker, items), sum(len(r.watches) for r in tracker.runs.values())))
