"""What travels from intake to a result, column by column: `Jobs` (MS2 spectra, their stamps, their runs).

`Stamps` are what answering needs of any message, as arrays: when it was sent and received,
its budget. `Jobs` are stamped spectra on their way through the batcher and the engine: a
`SpectraBatch`, its `Stamps`, and each spectrum's run (an index into ``states``) — no Python
object a spectrum. A `RunState` is one open run (or segment of a run that was reopened after its
``run.end``): its `LiveRun`, guarded by the run's own lock, and the counts the `RunBook` keeps
under the book's lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.search.live import LiveRun
from rtsearch.serve.intake.chunks import FLOAT_COLUMNS, INT_COLUMNS, SpectraChunk, budgets_ns


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
    received: int = 0  # valid spectra received (MS1, MS2): what `expected` counts
    ended_ns: int = 0  # monotonic clock when it got its run.end
    ms1: int = 0  # MS1 spectra received
    last_ns: int = 0  # monotonic clock of its last message (idle runs are ended)
    scans: set[int] = field(default_factory=set)  # MS2 scans received (on the event loop only)
    duplicates: int = 0  # MS2 spectra whose scan the run had received already (answered all the same)

    @property
    def name(self) -> str:
        return self.live.name


@dataclass
class Stamps:
    """Stamps of messages, as arrays: sent (the sender's wall clock; -1 unknown), received (wall clock for
    the wire, monotonic for latency), budget, and whether the sender asked for answers in batches."""

    sent_ns: np.ndarray  # int64
    received_ns: np.ndarray  # int64
    received_mono: np.ndarray  # int64
    budget_ns: np.ndarray  # int64
    batched: np.ndarray  # bool: answered in a ``batch.results`` message (`rtsearch.protocol.batch`)

    def __len__(self) -> int:
        return int(self.sent_ns.shape[0])

    @classmethod
    def one(cls, sent_ns: int | None, received_ns: int, received_mono: int, budget_ns: int, *,
            batched: bool = False) -> Stamps:  # fmt: skip
        col = lambda v: np.array([v], dtype=np.int64)  # noqa: E731
        return cls(col(-1 if sent_ns is None else sent_ns), col(received_ns), col(received_mono), col(budget_ns),
                   np.array([batched]))  # fmt: skip

    def take(self, rows: np.ndarray) -> Stamps:
        return Stamps(self.sent_ns[rows], self.received_ns[rows], self.received_mono[rows], self.budget_ns[rows],
                      self.batched[rows])  # fmt: skip

    @classmethod
    def concat(cls, parts: Sequence[Stamps]) -> Stamps:
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                     ("sent_ns", "received_ns", "received_mono", "budget_ns", "batched")))  # fmt: skip


@dataclass
class Jobs:
    """MS2 spectra between intake and their answers: spectra, stamps, and each one's run (``states[run[i]]``)."""

    spectra: SpectraBatch
    stamps: Stamps
    run: np.ndarray  # int32 [S]: index into ``states``
    states: list[RunState]

    def __len__(self) -> int:
        return len(self.spectra)

    def take(self, rows: Sequence[int] | np.ndarray) -> Jobs:
        idx = np.asarray(rows, dtype=np.int64)
        return Jobs(self.spectra.take(idx), self.stamps.take(idx), self.run[idx], self.states)

    @classmethod
    def concat(cls, parts: Sequence[Jobs]) -> Jobs:
        """One `Jobs` holding ``parts`` in order (their runs merged)."""
        states: list[RunState] = []
        index: dict[int, int] = {}
        if all(len(p.states) == 1 for p in parts):  # the usual parts, chunks of one run each: no remapping a part
            for p in parts:
                if id(p.states[0]) not in index:
                    index[id(p.states[0])] = len(states)
                    states.append(p.states[0])
            ats = np.array([index[id(p.states[0])] for p in parts], dtype=np.int32)
            run = np.repeat(ats, [len(p) for p in parts])
            return cls(SpectraBatch.concat([p.spectra for p in parts]), Stamps.concat([p.stamps for p in parts]),
                       run, states)  # fmt: skip
        runs = []
        for p in parts:
            remap = np.empty(len(p.states), dtype=np.int32)
            for k, state in enumerate(p.states):
                at = index.get(id(state))
                if at is None:
                    at = index[id(state)] = len(states)
                    states.append(state)
                remap[k] = at
            runs.append(remap[p.run])
        return cls(SpectraBatch.concat([p.spectra for p in parts]), Stamps.concat([p.stamps for p in parts]),
                   np.concatenate(runs) if runs else np.zeros(0, np.int32), states)  # fmt: skip

    def by_run(self) -> list[tuple[RunState, np.ndarray]]:
        """Each run with the positions of its spectra, in order; runs by first appearance."""
        if len(self.states) == 1:
            return [(self.states[0], np.arange(len(self), dtype=np.int64))]
        order = np.argsort(self.run, kind="stable")
        runs, starts = np.unique(self.run[order], return_index=True)
        ends = [*starts[1:].tolist(), len(order)]
        groups = [(int(r), order[a:b]) for r, a, b in zip(runs.tolist(), starts.tolist(), ends, strict=True)]
        groups.sort(key=lambda g: int(g[1][0]))
        return [(self.states[r], rows) for r, rows in groups]


def jobs_of_chunk(chunk: SpectraChunk, states: list[RunState], default_budget_ms: float) -> Jobs:
    """The MS2 spectra of a chunk as `Jobs` (``states``: the runs of ``chunk.runs``, in order); a spectrum
    without a budget gets ``default_budget_ms``."""
    ints, floats = chunk.ints, chunk.floats
    ms2 = ints[:, _LEVEL] >= 2
    offsets = chunk.offsets
    rows = None if bool(ms2.all()) else np.flatnonzero(ms2)
    run = ints[:, _RUN].astype(np.int32)
    names = chunk.runs
    every = SpectraBatch(
        run=[names[i] for i in run.tolist()], scan=ints[:, _SCAN], precursor_mz=floats[:, _PREC], rt=floats[:, _RT],
        charges=chunk.charges, problem=[""] * len(run), mz=chunk.mz, intensity=chunk.intensity, offsets=offsets,
        native_id=chunk.ids,
    )  # fmt: skip
    budget = budgets_ns(floats, default_budget_ms).astype(np.int64)
    stamps = Stamps(ints[:, _SENT], ints[:, _WALL], ints[:, _MONO], budget, ints[:, _BATCHED] != 0)
    jobs = Jobs(every, stamps, run, states)
    return jobs if rows is None else jobs.take(rows)


# the columns of `SpectraChunk.ints` and `.floats` (`rtsearch.serve.intake.chunks`)
_RUN, _SCAN, _LEVEL, _SENT, _WALL, _MONO, _BATCHED = (
    INT_COLUMNS.index(c) for c in ("run", "scan", "ms_level", "sent_ns", "wall_ns", "mono_ns", "batched")
)
_RT, _PREC = FLOAT_COLUMNS.index("rt"), FLOAT_COLUMNS.index("precursor_mz")
