"""What the daemon's parts report, as plain dataclasses; `DaemonMetrics.record` turns them into metrics.

The loop, the workers and the publisher never touch a Prometheus object: each hands
`rtsearch.serve.observe.metrics.DaemonMetrics.record` one of these (vLLM's stat-logger pattern), so
what is measured is separate from how it is exported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rtsearch.cluster.status import Cluster


@dataclass
class Ready:
    """The daemon opened intake (True) or is shutting down (False)."""

    ready: bool


@dataclass
class Received:
    """Messages the loop took from intake: spectra by MS level, malformed ones by reason code, and the spectra's
    arrival: their age when their intake process received them and the seconds since, as the loop takes them
    (`rtsearch.serve.engine.admission.arrival_times`)."""

    spectra: dict[int, int] = field(default_factory=dict)
    invalid: dict[str, int] = field(default_factory=dict)
    arrival: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class Queue:
    """The batcher and the engine now: spectra waiting, batches being scored; where the pool said it, the wait a
    spectrum arriving now was predicted (the door's advice, seconds) and the engine-time model it came from
    (fixed seconds a batch and seconds a spectrum of the engine, of a scored batch until answered — the tail —
    and of the results thread's own work: `MicroBatcher.model_terms`): what the admission sheds by."""

    waiting: int
    in_flight: int
    advised_wait_s: float | None = None
    model_s: tuple[float, ...] | None = None


@dataclass
class Taken:
    """A worker took a batch: its size, how long each spectrum waited for it (seconds), and the engine thread's own
    seconds: waiting for the batch (idle, or held back by the batcher) and gathering its spectra."""

    size: int
    waited_s: np.ndarray
    idle_s: float = 0.0
    gather_s: float = 0.0


@dataclass
class Scored:
    """A worker finished a batch: engine seconds, and its seconds per stage (`WORKER_STAGES`)."""

    engine_s: float
    stages: dict[str, float]


@dataclass
class RunAnswered:
    """One run's part of an `Answered`: results, identifications, and its running FDR threshold."""

    run: str
    results: int
    identified: int
    threshold: float


@dataclass
class Answered:
    """Results published in one call: latency from receipt, budgets missed, counts by status, per run."""

    latency_s: np.ndarray
    missed: int
    by_status: dict[str, int]
    runs: list[RunAnswered]


@dataclass
class Shed:
    """Spectra answered unscored under overload or at shutdown, and why
    (`rtsearch.serve.observe.metrics.SHED_REASONS`)."""

    reason: str
    count: int


@dataclass
class Runs:
    """Runs open now; ``finished`` names a run whose results file was just written."""

    open: int
    finished: str | None = None
    still_open: bool = False  # another segment of ``finished``'s name is open: keep its series


@dataclass
class ResultsWrite:
    """A run's results file could not be written (kept in its journal; tried again)."""

    failed: int = 1


@dataclass
class JournalWrite:
    """A journal write failed (``failed``: tries), or what the journals that cannot be written owe changed
    (``owed_bytes``: answers published and not on disk yet; 0 once all are)."""

    failed: int = 0
    owed_bytes: int | None = None


@dataclass
class RunFinishFailed:
    """A run could not be finished (its final FDR or its file failed for a reason other than the disk): what could be
    written was, and its journal was moved aside with the reason."""

    failed: int = 1


@dataclass
class Mqtt:
    """The MQTT publisher's state: connected or not, messages dropped since the last report."""

    connected: bool | None = None
    dropped: int = 0


@dataclass
class Elution:
    """The elution service (`rtsearch.serve.outputs.elution`): events published by kind, precursors followed now (None:
    unchanged), items dropped at its full queue."""

    events: dict[str, int] = field(default_factory=dict)
    followed: int | None = None
    dropped: int = 0


@dataclass
class ExecutorStats:
    """What an executor scored so far: batches and their spectra, the seconds they took (the engine thread's wait on
    its scorer), and the batches that failed (answered ``unidentified`` with the reason). The daemon's metrics read
    them when scraped (``rtsearch_executor_*{path}``)."""

    path: str
    batches: int = 0
    spectra: int = 0
    busy_s: float = 0.0
    failed: int = 0


Stat = Ready | Received | Queue | Taken | Scored | Answered | Shed | Runs | Mqtt | Elution | Cluster
