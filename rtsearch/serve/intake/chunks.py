"""What the intake process hands the daemon: spectra as columns, and the kinds of message between the two.

A `SpectraChunk` holds consecutive valid spectrum messages column by column
(built in the intake process by `ChunkBuilder`); a `Received` holds one control
or malformed message. Between the processes they travel over a Unix socket
pair, each as one length-prefixed message (`rtsearch.serve.children.framing`: `pack`, `Unpacker`).

A chunk's parts are its JSON metadata and its raw arrays, so a burst of a few
hundred spectra costs a handful of buffer copies, not a pickle per spectrum.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import orjson

from rtsearch.protocol.batch import SpectraBlock
from rtsearch.protocol.peaks import peak_problems
from rtsearch.protocol.wire import Invalid, InvalidCode, Message, RawSpectrum
from rtsearch.serve.children.framing import pack
from rtsearch.types import Spectrum

# kinds of message: intake process -> daemon; SHED: spectra the intake process answers ``shed`` itself
# (`rtsearch.serve.engine.admission`), for the daemon to journal and book. Daemon -> intake process: STOP, and ACK (a
# shed report journaled: its answers may be published)
SPECTRA, MESSAGE, READY, ERROR, CLOSED, SHED, STOP, ACK = 1, 2, 3, 4, 5, 6, 7, 8

CHUNK_MAX = 512  # spectra a chunk at most (read, merged): bounds the daemon's lock hold a chunk
T = TypeVar("T")  # an item a daemon takes from its intake: a chunk, a shed report, a message


@dataclass(frozen=True, slots=True)
class Received:
    """A decoded message and when it arrived (wall clock for the wire, monotonic for latency)."""

    message: Message
    wall_ns: int
    mono_ns: int
    batched: bool = False  # an ``invalid`` answer to it goes in a ``batch.results`` message (`rtsearch.protocol.batch`)


# columns of `SpectraChunk.ints`; ``batched``: 1 where the sender asked for answers in batches
# (`rtsearch.protocol.batch`)
INT_COLUMNS = ("run", "scan", "ms_level", "sent_ns", "wall_ns", "mono_ns", "batched")
FLOAT_COLUMNS = ("rt", "precursor_mz", "precursor_intensity", "budget_ms")  # columns of `SpectraChunk.floats`
_RUN_COLUMN, _LEVEL_COLUMN = INT_COLUMNS.index("run"), INT_COLUMNS.index("ms_level")
_BUDGET_COLUMN = FLOAT_COLUMNS.index("budget_ms")


def budgets_ns(floats: np.ndarray, default_ms: float) -> np.ndarray:
    """Each row's budget in ns (float64): its header's ``budget_ms``, else ``default_ms``."""
    budget = floats[:, _BUDGET_COLUMN]
    return np.where(np.isnan(budget), default_ms, budget) * 1e6


@dataclass(slots=True)
class SpectraChunk:
    """Consecutive valid spectrum messages, column by column (row ``i`` is the ``i``-th received).

    Integer header fields are the columns of ``ints`` (`INT_COLUMNS`: ``run`` indexes ``runs``;
    ``mono_ns`` is ``time.monotonic_ns`` at receipt, one system clock for the daemon's
    processes), floats those of ``floats`` (`FLOAT_COLUMNS`: ``budget_ms`` NaN where the header gave
    none). Peaks are concatenated; MS1 spectra keep their header fields but no peaks (the
    daemon only counts them). It crosses from the intake process as one message (`parts`,
    `from_parts`): a handful of buffers, whatever the number of spectra.
    """

    runs: list[str]
    charges: list[tuple[int, ...]]
    ints: np.ndarray  # int64 [n, len(INT_COLUMNS)]
    floats: np.ndarray  # float64 [n, len(FLOAT_COLUMNS)]
    mz: np.ndarray  # float64, every spectrum's peaks concatenated
    intensity: np.ndarray  # float32
    offsets: np.ndarray  # int64 [n + 1]: peaks of row i are [offsets[i], offsets[i + 1])
    ids: list[str] = field(default_factory=list)  # [n] each spectrum's native id (header ``id``); [] when none came

    def __len__(self) -> int:
        return int(self.ints.shape[0])

    def ids_at(self, rows: Sequence[int] | np.ndarray) -> list[str]:
        """The native ids of ``rows`` ([] when the chunk has none)."""
        ids = self.ids
        return [ids[i] for i in np.asarray(rows).tolist()] if ids else []

    def parts(self) -> list[bytes | memoryview]:
        """The chunk as the parts of one `SPECTRA` message (`pack`): JSON metadata, then the raw arrays."""
        meta = orjson.dumps({"runs": self.runs, "charges": self.charges, **({"ids": self.ids} if self.ids else {})})
        arrays = (self.ints, self.floats, self.mz, self.intensity, self.offsets)
        return [meta, *(np.ascontiguousarray(a).reshape(-1).view(np.uint8).data for a in arrays)]

    @classmethod
    def from_parts(cls, parts: Sequence[memoryview]) -> SpectraChunk:
        """The chunk `parts` made (arrays are read-only views of the message's buffer)."""
        meta = orjson.loads(parts[0])
        ints = np.frombuffer(parts[1], dtype=np.int64).reshape(-1, len(INT_COLUMNS))
        floats = np.frombuffer(parts[2], dtype=np.float64).reshape(-1, len(FLOAT_COLUMNS))
        return cls(meta["runs"], [tuple(z) for z in meta["charges"]], ints, floats,
                   np.frombuffer(parts[3], dtype=np.float64), np.frombuffer(parts[4], dtype=np.float32),
                   np.frombuffer(parts[5], dtype=np.int64), meta.get("ids", []))  # fmt: skip

    @classmethod
    def concat(cls, chunks: Sequence[SpectraChunk]) -> SpectraChunk:
        """One chunk holding ``chunks`` in order (their runs merged)."""
        runs: dict[str, int] = {}
        ints = []
        for c in chunks:
            remap = np.array([runs.setdefault(name, len(runs)) for name in c.runs], dtype=np.int64)
            i = c.ints.copy()
            i[:, _RUN_COLUMN] = remap[i[:, _RUN_COLUMN]]
            ints.append(i)
        n_peaks = np.concatenate([np.diff(c.offsets) for c in chunks])
        offsets = np.zeros(len(n_peaks) + 1, dtype=np.int64)
        np.cumsum(n_peaks, out=offsets[1:])
        return cls(list(runs), [z for c in chunks for z in c.charges], np.concatenate(ints),
                   np.concatenate([c.floats for c in chunks]), np.concatenate([c.mz for c in chunks]),
                   np.concatenate([c.intensity for c in chunks]), offsets,
                   [n for c in chunks for n in (c.ids or [""] * len(c))] if any(c.ids for c in chunks) else [],
                   )  # fmt: skip

    def split(self, rows: np.ndarray) -> tuple[SpectraChunk | None, SpectraChunk]:
        """The chunk without ``rows`` (``None`` when nothing is left), and ``rows`` alone, without their peaks."""
        out = np.zeros(len(self), dtype=bool)
        out[rows] = True
        taken = SpectraChunk(self.runs, [self.charges[i] for i in rows.tolist()], self.ints[rows], self.floats[rows],
                             np.zeros(0), np.zeros(0, np.float32), np.zeros(len(rows) + 1, np.int64),
                             self.ids_at(rows))  # fmt: skip
        keep = ~out
        return (self.select(keep) if keep.any() else None), taken

    def select(self, keep: np.ndarray) -> SpectraChunk:
        """The rows where ``keep`` (a mask) is true, with their peaks, in order."""
        n_peaks = np.diff(self.offsets)
        peaks = np.repeat(keep, n_peaks)
        offsets = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
        np.cumsum(n_peaks[keep], out=offsets[1:])
        charges = [z for z, k in zip(self.charges, keep.tolist(), strict=True) if k]
        mz, intensity = self.mz[peaks], self.intensity[peaks]
        return SpectraChunk(self.runs, charges, self.ints[keep], self.floats[keep], mz, intensity, offsets,
                            self.ids_at(np.flatnonzero(keep)))  # fmt: skip

    def rows(self) -> Iterator[tuple[int, Spectrum, int, int, int, float]]:
        """Each row as ``(run index, spectrum, sent_ns, wall_ns, mono_ns, budget_ms)``, in arrival order.

        Plain lists underneath: a chunk holds one spectrum at low rates, where NumPy calls per
        row would cost more than the Python. Peaks are views into this chunk's arrays.
        """
        names, charges, mz, inten, offsets = self.runs, self.charges, self.mz, self.intensity, self.offsets.tolist()
        ids = self.ids or [""] * len(self)
        for i, ((r, scan, level, sent, wall, mono, _), (rt, prec, pi, budget)) in enumerate(
            zip(self.ints.tolist(), self.floats.tolist(), strict=True)
        ):
            a, b = offsets[i], offsets[i + 1]
            sp = Spectrum(names[r], scan, level, mz[a:b], inten[a:b], prec, charges[i], rt, pi, native_id=ids[i])
            yield r, sp, sent, wall, mono, budget


@dataclass(slots=True)
class ShedChunk:
    """Spectra an intake process answers ``shed`` at the door (peaks dropped) and the reason it gives: a report the
    daemon journals before the answers are published (the intake process publishes them once the daemon acknowledges
    report ``seq``, `rtsearch.serve.intake.intake_process.Door`)."""

    chunk: SpectraChunk
    reason: str
    seq: int  # the report's number, counted by the intake process that sent it (its `ACK` names it)
    source: int = -1  # the daemon's side: which of its intake processes sent it (set on receipt)

    def parts(self) -> list[bytes | memoryview]:
        return [orjson.dumps({"reason": self.reason, "seq": self.seq}), *self.chunk.parts()]

    @classmethod
    def from_parts(cls, parts: Sequence[memoryview], source: int = -1) -> ShedChunk:
        meta = orjson.loads(parts[0])
        return cls(SpectraChunk.from_parts(parts[1:]), meta["reason"], int(meta["seq"]), source)


def ack_message(seq: int) -> bytes:
    """The daemon's word to an intake process that shed report ``seq`` is journaled (its answers may go out)."""
    return pack(ACK, [seq.to_bytes(8, "little")])


def stop_message() -> bytes:
    """The daemon's word to an intake process to stop reading (see `rtsearch.serve.intake.intake_process`)."""
    return pack(STOP)


def merged(items: Sequence[T], limit: int) -> list[T]:
    """``items`` in order with each run of consecutive `SpectraChunk` s joined, up to ``limit`` spectra a chunk: the
    daemon's cost is per chunk (its queue's admission, the metrics), so chunks that queued up behind a busy event
    loop cost it once together, not once each — the more it lags, the less each spectrum costs it. Other items
    (control messages, shed reports) keep their place between the runs."""
    if len(items) < 2:  # the usual wake-up, and a lone spectrum's: nothing to join
        return list(items)
    out: list[T] = []
    run: list[SpectraChunk] = []
    size = 0
    for item in [*items, None]:
        if isinstance(item, SpectraChunk) and (not run or size + len(item) <= limit):
            run.append(item)
            size += len(item)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else SpectraChunk.concat(run))  # type: ignore[arg-type]
        run, size = ([item], len(item)) if isinstance(item, SpectraChunk) else ([], 0)
        if item is not None and not isinstance(item, SpectraChunk):
            out.append(item)
    return out


class ChunkBuilder:
    """Collects decoded spectrum messages into `SpectraChunk` s (in the intake process).

    Messages come in as `RawSpectrum` (`rtsearch.protocol.wire.decode` with ``peaks="raw"``): no
    objects per spectrum, peak bytes joined once per chunk, and peak values checked all at
    once when the chunk is built (`rtsearch.protocol.peaks.peak_problems`, decode's rules and reasons). MS1 spectra keep
    their peaks only with ``keep_ms1`` (the daemon follows elution: `rtsearch.serve.outputs.elution`).
    """

    def __init__(self, *, keep_ms1: bool = False) -> None:
        self.keep_ms1 = keep_ms1
        self._reset()

    def _reset(self) -> None:
        self._runs: dict[str, int] = {}
        self._ints: list[tuple[int, ...]] = []
        self._floats: list[tuple[float, ...]] = []
        self._n_peaks: list[int] = []
        self._charges: list[tuple[int, ...]] = []
        self._ids: list[str] = []
        self._mz: list[bytes] = []
        self._inten: list[bytes] = []
        self._ms1 = False

    def __len__(self) -> int:
        return len(self._ints)

    def add(self, sp: RawSpectrum, wall_ns: int, mono_ns: int) -> None:
        run = self._runs.setdefault(sp.run, len(self._runs))
        self._ints.append((run, sp.scan, sp.ms_level, sp.sent_ns, wall_ns, mono_ns, 0))
        self._floats.append((sp.rt, sp.precursor_mz, sp.precursor_intensity, sp.budget_ms))
        self._charges.append(sp.charges)
        self._ids.append(sp.native_id)
        self._n_peaks.append(len(sp.intensity) >> 2)
        self._mz.append(sp.mz)
        self._inten.append(sp.intensity)
        self._ms1 |= sp.ms_level < 2 and not self.keep_ms1

    def build(self) -> list[SpectraChunk | Received]:
        """The chunk of everything added, then an ``invalid`` `Received` for each spectrum whose
        peaks are refused (left out of the chunk); the builder is empty again."""
        offsets = np.zeros(len(self._ints) + 1, dtype=np.int64)
        np.cumsum(self._n_peaks, out=offsets[1:])
        ints = np.array(self._ints, dtype=np.int64).reshape(-1, len(INT_COLUMNS))
        floats = np.array(self._floats, dtype=np.float64).reshape(-1, len(FLOAT_COLUMNS))
        mz = np.frombuffer(b"".join(self._mz), dtype="<f8")
        inten = np.frombuffer(b"".join(self._inten), dtype="<f4")
        chunk = SpectraChunk(list(self._runs), self._charges, ints, floats, mz, inten, offsets,
                             self._ids if any(self._ids) else [])  # fmt: skip
        problems = peak_problems(mz, inten, offsets)
        bad: list[tuple[int, InvalidCode, str]] = [(row, "peaks", why) for row, why in problems]
        ms1 = self._ms1
        self._reset()
        return screened(chunk, bad, ms1=ms1)


def block_items(block: SpectraBlock, wall_ns: int, mono_ns: int, *,
                keep_ms1: bool = False) -> list[SpectraChunk | Received]:  # fmt: skip
    """A ``spectra`` message (`rtsearch.protocol.batch`) as the chunk of its valid rows, then an ``invalid``
    `Received` for each row refused (its fields, or its peaks), in row order: NumPy per block, not per row."""
    ints = np.empty((len(block), len(INT_COLUMNS)), dtype=np.int64)
    for name, value in (("run", 0), ("scan", block.scan), ("ms_level", block.ms_level), ("sent_ns", block.sent_ns),
                        ("wall_ns", wall_ns), ("mono_ns", mono_ns), ("batched", block.answer == "batch")):  # fmt: skip
        ints[:, INT_COLUMNS.index(name)] = value
    floats = np.empty((len(block), len(FLOAT_COLUMNS)), dtype=np.float64)
    for name, v in (("rt", block.rt), ("precursor_mz", block.precursor_mz), ("precursor_intensity", 0.0),
                    ("budget_ms", block.budget_ms)):  # fmt: skip
        floats[:, FLOAT_COLUMNS.index(name)] = v
    charges: list[tuple[int, ...]] = [(z,) if z else () for z in block.charge.tolist()]
    chunk = SpectraChunk([block.run], charges, ints, floats, block.mz, block.intensity, block.offsets, block.ids)
    bad: dict[int, tuple[InvalidCode, str]] = {
        row: ("peaks", why) for row, why in peak_problems(block.mz, block.intensity, block.offsets)
    }
    for row, code, why in block.problems:  # a field problem is said before a peak value's
        bad[row] = (code, why)
    return screened(chunk, [(row, *bad[row]) for row in sorted(bad)],
                    ms1=not keep_ms1 and bool((block.ms_level < 2).any()))  # fmt: skip


def screened(
    chunk: SpectraChunk, bad: Sequence[tuple[int, InvalidCode, str]], *, ms1: bool
) -> list[SpectraChunk | Received]:
    """``chunk`` without the rows ``bad`` names (``(row, code, reason)``, in row order) and without MS1 peaks (the
    daemon only counts MS1 spectra), then an ``invalid`` `Received` for each bad row."""
    if not bad and not ms1:
        return [chunk] if len(chunk) else []
    ints, floats, offsets = chunk.ints, chunk.floats, chunk.offsets
    keep = np.ones(len(ints), dtype=bool)
    keep[[row for row, _, _ in bad]] = False
    with_peaks = keep & (ints[:, _LEVEL_COLUMN] >= 2)
    n_peaks = np.diff(offsets)
    take = np.repeat(with_peaks, n_peaks)
    offsets = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
    np.cumsum((n_peaks * with_peaks)[keep], out=offsets[1:])
    charges = [z for z, k in zip(chunk.charges, keep.tolist(), strict=True) if k]
    out: list[SpectraChunk | Received] = []
    if keep.any():
        out.append(SpectraChunk(chunk.runs, charges, ints[keep], floats[keep], chunk.mz[take], chunk.intensity[take],
                                offsets, chunk.ids_at(np.flatnonzero(keep))))  # fmt: skip
    for (_, code, reason), (run, scan, level, sent, wall, mono, batched) in zip(
        bad, ints[[row for row, _, _ in bad]].tolist(), strict=True
    ):
        out.append(Received(Invalid(code, reason, chunk.runs[run], scan, level, sent), wall, mono, bool(batched)))
    return out
