"""What travels from intake to a result: a `Job` (an MS2 spectrum and its stamps) and its run's `RunState`.

A `Stamp` is what answering needs of any message (when it was sent and received,
its budget, its run); a `Job` is a stamped spectrum on its way through the
batcher and the engine. A `RunState` is one open run (or segment of a run that was
reopened after its ``run.end``): its `LiveRun`, guarded by the run's own lock, and
the counts the `RunBook` keeps under the book's lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from rtsearch.search.live import LiveRun
from rtsearch.types import Spectrum


@dataclass(eq=False)
class RunState:
    """One open run (segment); ``live`` is read and changed under ``lock``, the counts under the `RunBook`'s."""

    live: LiveRun
    lock: threading.Lock = field(default_factory=threading.Lock)
    threshold: float = float("nan")  # the run's running FDR threshold after its last scored batch
    outstanding: int = 0  # received MS2 spectra not yet answered
    ending: bool = False  # its run.end came (or the daemon is shutting down)
    finishing: bool = False  # its table is being finalized
    expected: int | None = None  # spectra run.end announced
    ms1: int = 0  # MS1 spectra received
    last_ns: int = 0  # monotonic clock of its last message (idle runs are ended)
    scans: set[int] = field(default_factory=set)  # MS2 scans received (on the event loop only)
    duplicates: int = 0  # MS2 spectra whose scan the run had received already (answered all the same)

    @property
    def name(self) -> str:
        return self.live.name


@dataclass(slots=True)
class Stamp:
    """What answering a message needs: its wire stamps, when it arrived, its budget, its run."""

    sent_ns: int | None  # the sender's wall clock, echoed
    received_ns: int  # wall clock, for the wire
    received_mono: int  # monotonic, for latency
    budget_ns: int
    state: RunState


@dataclass(slots=True)
class Job(Stamp):
    """One MS2 spectrum between intake and its result."""

    spectrum: Spectrum


def by_run(stamps: Sequence[Stamp]) -> list[list[int]]:
    """Positions of ``stamps`` grouped by run (segment), each group in order, groups by first appearance."""
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(stamps):
        groups.setdefault(id(s.state), []).append(i)
    return list(groups.values())
