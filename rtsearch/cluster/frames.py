"""The cluster's wire: what crosses a front door's and its workers' sockets, as explicit frames.

Nothing a peer sends is unpickled or evaluated (issue 67: a pickled hello ran a shell command in the daemon). A
message is its verb, a small JSON header and raw little-endian arrays, one a frame, in the order and with the
dtypes this module fixes. A header is a typed msgspec struct, decoded with every field's type and bound checked in
one C call (a 2,048-spectrum batch reads in ~0.85 of the time the field-by-field checks over orjson took, measured
on the development machine); every length comes from the header and every frame is checked against it before a
view is made. The ``read_*`` functions raise `FrameError` on anything else — a wrong count or length, an unknown
kind, a count past its bound, a header that is not JSON — and no other exception, so that a caller drops the message
and goes on. Each side has a verb a message (`rtsearch.cluster.worker` draws the flow)::

    worker ─ hello    {name, piece, pid, backend, entries, device_bytes, gpu}                       `hello`
    door   ─ batch    rid │ {kind: batch, n, peaks, runs, charges, problems, native_id, own}        `batch_frames`
                      │ scan i8[n] precursor_mz f8[n] rt f8[n] offsets i8[n+1] mz f8[peaks] intensity f4[peaks]
                      run# charges# problem# i4[n] │ (own: its queries' masses f8[2], [lo, hi) Da; else whole)
    worker ─ scored   rid │ took, waited, share ns u64[3] │ reply: one of                            `reply_frames`
                      {kind: scored, n, runs, reasons, stages, native_id, names, features: [F, ...]} (`ScoredBatch`)
                      │ scan i8 precursor_mz f8 rt f8 run# reason# i4 │ each rank: match i8 charge i8 calc_mz f8
                      ppm_error f8 matched_peaks i8 features f8[n, F]
                      {kind: queries, n, q, k, reasons, stages}                                      (`QueryScores`)
                      │ spectrum charge mass lo hi order i8[q] │ cand i8[q, k] prelim i4[q, k] │ stats f8[q, k] × 10
                      │ match_probability f8[n] reason# i4[n]
                      {kind: error, text}
    worker ─ beat     identity │ busy-for ns u64 (its heartbeat PUSH)                              `beat_frames`
    door   ─ stop

A column of few distinct values (runs, charges, problems, reasons) travels as those values in the header and each
row's index among them (``x#``): a batch's 2,048 spectra of one run are one name, and a list of 2,048 charge tuples
would cost the reader three times as much as JSON. Arrays leave as views of their columns (no copy until ZeroMQ's)
and come back as read-only views of the received frames; arrays of other dtypes are cast to the wire's (a float32
feature comes back float64, exactly). Against the pickle (protocol 5) it replaces, for 2,048 spectra of the dev runs
(issue 67, this module's first measurement): a batch encodes in about as much time and decodes in 0.75 of it, an
answer encodes in 0.7 and decodes in 1.1; a batch's trip through a TCP socket costs the same.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import fields
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
from msgspec import Meta, Struct

from rtsearch.batch import SpectraBatch
from rtsearch.matches import BestMatches, Names, ScoredBatch
from rtsearch.scoring.database.candidates import Queries
from rtsearch.scoring.database.matching import MatchStats
from rtsearch.scoring.database.partial import QueryScores

Frame = bytes | memoryview
Layout = list[tuple[str, np.dtype[Any], tuple[int, ...]]]  # a message's arrays: name, dtype, shape
Own = tuple[float, float]  # a piece's precursor masses, [lo, hi) Da (`rtsearch.cluster.pieces.Own`)
Reply = tuple[Literal["scored"], ScoredBatch] | tuple[Literal["queries"], QueryScores] | tuple[Literal["error"], str]

# bounds on what a header may claim (the frames' own lengths are checked besides: a claim costs no memory)
MAX_ROWS = 1 << 24  # spectra, peaks' spectra or queries of one message
MAX_PEAKS = 1 << 34
MAX_WIDTH = 1 << 16  # features of a rank, candidates of a query, ranks
MAX_CHARGES = 64  # charges tried for one spectrum
MAX_CHARGE = 1000  # |z|
MAX_TEXT = 1 << 20  # characters of a text (a hello's, an error's, a name)
MAX_SECONDS = 1e9  # |seconds| of a reply's stage

_U64 = np.dtype("<u8")
_I8, _I4, _F8, _F4 = (np.dtype(t) for t in ("<i8", "<i4", "<f8", "<f4"))
_RANK = (("match", _I8), ("charge", _I8), ("calc_mz", _F8), ("ppm_error", _F8), ("matched_peaks", _I8))
_QUERY = (("spectrum", _I8), ("charge", _I8), ("mass", _F8), ("lo", _I8), ("hi", _I8))
_STATS = tuple(f.name for f in fields(MatchStats))


class FrameError(ValueError):
    """A message that is not what the cluster's wire says (see the module docstring)."""


Text = Annotated[str, Meta(max_length=MAX_TEXT)]
Rows = Annotated[int, Meta(ge=0, le=MAX_ROWS)]
Width = Annotated[int, Meta(ge=0, le=MAX_WIDTH)]
Count = Annotated[int, Meta(ge=0, le=1 << 62)]
Charges = Annotated[list[Annotated[int, Meta(ge=-MAX_CHARGE, le=MAX_CHARGE)]], Meta(max_length=MAX_CHARGES)]
# a stage's seconds: finite (JSON has no NaN, and a bound keeps out a number that overflows to infinity)
Stages = Annotated[dict[str, Annotated[float, Meta(ge=-MAX_SECONDS, le=MAX_SECONDS)]], Meta(max_length=MAX_WIDTH)]


class Hello(Struct, frozen=True):
    """What a worker says once its target is open: its name (its ZeroMQ identity) and piece, its process, the
    backend, the entries it searches, the bytes its device holds, its GPU (a local worker's, else "")."""

    name: Text
    piece: Annotated[int, Meta(ge=-1, le=MAX_ROWS)]
    pid: Annotated[int, Meta(ge=1, le=1 << 62)]
    backend: Text
    entries: Count = 0
    device_bytes: Count = 0
    gpu: Text = ""


# The headers: each a typed struct that msgspec decodes and bound-checks in one C call, a reply's kind its tag
class _Batch(Struct, tag="batch", tag_field="kind"):
    n: Rows
    peaks: Annotated[int, Meta(ge=0, le=MAX_PEAKS)]
    runs: list[Text]
    charges: list[Charges]
    problems: list[Text]
    native_id: list[Text]
    own: bool


class _Names(Struct):
    peptides: list[Text]
    proteins: list[list[Text]]


class _Scored(Struct, tag="scored", tag_field="kind"):
    n: Rows
    runs: list[Text]
    reasons: list[Text]
    stages: Stages
    native_id: list[Text]
    names: _Names | None
    features: Annotated[list[Width], Meta(min_length=1, max_length=MAX_WIDTH)]


class _Queries(Struct, tag="queries", tag_field="kind"):
    n: Rows
    q: Rows
    k: Width
    reasons: list[Text]
    stages: Stages


class _Error(Struct, tag="error", tag_field="kind"):
    text: Text


_HELLO = msgspec.json.Decoder(Hello)
_BATCH = msgspec.json.Decoder(_Batch)
_REPLY = msgspec.json.Decoder(_Scored | _Queries | _Error)
_encode = msgspec.json.Encoder().encode


# ------------------------------------------------------------------ encoding


def _raw(a: Any, dtype: np.dtype[Any]) -> memoryview:
    """``a``'s values as ``dtype``'s bytes, flat (a view where it already is that, C-ordered)."""
    return np.ascontiguousarray(a, dtype=dtype).reshape(-1).view(np.uint8).data


def _stages(stages: dict[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in stages.items() if math.isfinite(v)}  # (JSON has no NaN)


def hello(h: Hello) -> bytes:
    """The hello frame."""
    return _encode(h)


def _tabled(values: Sequence[Hashable]) -> tuple[list[Any], memoryview]:
    """A column of few distinct values (a batch's runs, charges, reasons) as those values and each row's index."""
    if not values or values.count(values[0]) == len(values):  # the usual: one run, no problem (C, no hashing)
        return list(values[:1]), np.zeros(len(values), _I4).data
    distinct = list(dict.fromkeys(values))
    at = {v: k for k, v in enumerate(distinct)}
    return distinct, np.fromiter(map(at.__getitem__, values), _I4, count=len(values)).data


def batch_frames(batch: SpectraBatch, own: Own | None) -> list[Frame]:
    """A batch's header and arrays (after the verb and the request id); ``own`` None: answered whole."""
    runs, run_at = _tabled(batch.run)
    problems, problem_at = _tabled(batch.problem)
    charges, charge_at = _tabled(batch.charges)  # (a list of tuples a spectrum costs the reader 3x in JSON)
    head = _Batch(len(batch), int(batch.offsets[-1]), runs, [list(map(int, z)) for z in charges], problems,
                  batch.native_id, own is not None)  # fmt: skip
    out: list[Frame] = [_encode(head), _raw(batch.scan, _I8), _raw(batch.precursor_mz, _F8), _raw(batch.rt, _F8),
                        _raw(batch.offsets, _I8), _raw(batch.mz, _F8), _raw(batch.intensity, _F4), run_at,
                        problem_at, charge_at]  # fmt: skip
    if own is not None:
        out.append(_raw(np.array(own, np.float64), _F8))
    return out


def reply_frames(reply: Reply) -> list[Frame]:
    """A worker's reply: its header and arrays (after the verb, the request id and the times)."""
    kind, payload = reply
    if kind == "error":
        return [_encode(_Error(str(payload)))]
    if kind == "scored":
        assert isinstance(payload, ScoredBatch)
        return _scored(payload)
    if kind == "queries":
        assert isinstance(payload, QueryScores)
        return _queries(payload)
    raise ValueError(f"no such reply: {kind!r}")


def _scored(b: ScoredBatch) -> list[Frame]:
    ranks = [b.best, *b.lower]
    runs, run_at = _tabled(b.run)
    reasons, reason_at = _tabled(b.reason)
    out: list[Frame] = [b"", _raw(b.scan, _I8), _raw(b.precursor_mz, _F8), _raw(b.rt, _F8), run_at, reason_at]
    names = None if b.names is None else _Names(b.names.peptides, b.names.proteins)
    out[0] = _encode(_Scored(len(b), runs, reasons, _stages(b.stages), b.native_id, names,
                             [int(r.features.shape[1]) for r in ranks]))  # fmt: skip
    for r in ranks:
        out.extend(_raw(getattr(r, name), dt) for name, dt in _RANK)
        out.append(_raw(r.features, _F8))
    return out


def _queries(s: QueryScores) -> list[Frame]:
    k = int(s.cand.shape[1]) if s.cand.ndim == 2 else 0
    reasons, reason_at = _tabled(s.reason)
    head = _Queries(len(s.reason), len(s.queries), k, reasons, _stages(s.stages))
    return [_encode(head), *(_raw(getattr(s.queries, name), dt) for name, dt in _QUERY), _raw(s.order, _I8),
            _raw(s.cand, _I8), _raw(s.prelim, _I4), *(_raw(getattr(s.stats, name), _F8) for name in _STATS),
            _raw(s.match_probability, _F8), reason_at]  # fmt: skip


def beat_frames(identity: bytes, busy_ns: int) -> list[bytes]:
    """A heartbeat: the worker's identity (`rtsearch.cluster.auth.identity`), how long its batch in hand has taken
    (0: idle)."""
    return [identity, max(int(busy_ns), 0).to_bytes(8, "little")]


def times_frame(took: int, waited: int, share: int) -> bytes:
    """A reply's times (ns): its round's scoring, its wait there before it, its spectra's share of the round."""
    return np.array([took, waited, share], dtype=_U64).tobytes()


# ------------------------------------------------------------------ decoding (validated)


def read_hello(frame: Frame) -> Hello:
    """A worker's hello."""
    return _json(_HELLO, frame)


def read_beat(frames: Sequence[Frame]) -> tuple[bytes, int]:
    """A heartbeat's worker identity and busy-for ns."""
    if len(frames) != 2 or _size(frames[1]) != 8:
        raise FrameError(f"a heartbeat is an identity and 8 bytes, not {len(frames)} frames")
    return bytes(frames[0]), int.from_bytes(frames[1], "little")


def read_times(frame: Frame) -> tuple[int, int, int]:
    if _size(frame) != 3 * _U64.itemsize:
        raise FrameError(f"a reply's times are 24 bytes, not {_size(frame)}")
    took, waited, share = np.frombuffer(frame, dtype=_U64).tolist()
    return took, waited, share


def read_batch(frames: Sequence[Frame]) -> tuple[SpectraBatch, Own | None]:
    """A batch and its queries' mass range (None: answer it whole), from `batch_frames`' frames."""
    if not frames:
        raise FrameError("a batch without a header")
    head = _json(_BATCH, frames[0])
    n, peaks = head.n, head.peaks
    layout: Layout = [("scan", _I8, (n,)), ("precursor_mz", _F8, (n,)), ("rt", _F8, (n,)), ("offsets", _I8, (n + 1,)),
                      ("mz", _F8, (peaks,)), ("intensity", _F4, (peaks,)), ("run#", _I4, (n,)),
                      ("problem#", _I4, (n,)), ("charges#", _I4, (n,))]  # fmt: skip
    if head.own:
        layout.append(("own", _F8, (2,)))
    a = _arrays(frames[1:], layout)
    offsets = a["offsets"]
    if offsets[0] != 0 or offsets[-1] != peaks or (n and bool((offsets[1:] < offsets[:-1]).any())):
        raise FrameError("a batch's offsets do not rise from 0 to its peaks")
    span: Own | None = None
    if head.own:
        lo, hi = a["own"].tolist()
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            raise FrameError(f"a batch's mass range [{lo}, {hi}) is not one")
        span = (lo, hi)
    batch = SpectraBatch(_rows(head.runs, a["run#"], "run"), a["scan"], a["precursor_mz"], a["rt"],
                         _rows(list(map(tuple, head.charges)), a["charges#"], "charges"),
                         _rows(head.problems, a["problem#"], "problem"), a["mz"], a["intensity"], offsets,
                         _ids(head.native_id, n))  # fmt: skip
    return batch, span


def read_reply(frames: Sequence[Frame]) -> Reply:
    """A worker's reply, from `reply_frames`' frames."""
    if not frames:
        raise FrameError("a reply without a header")
    head = _json(_REPLY, frames[0])
    if isinstance(head, _Scored):
        return "scored", _read_scored(head, frames[1:])
    if isinstance(head, _Queries):
        return "queries", _read_queries(head, frames[1:])
    if len(frames) != 1:
        raise FrameError("an error reply has no arrays")
    return "error", head.text


def _read_scored(head: _Scored, frames: Sequence[Frame]) -> ScoredBatch:
    n = head.n
    layout: Layout = [("scan", _I8, (n,)), ("precursor_mz", _F8, (n,)), ("rt", _F8, (n,)), ("run#", _I4, (n,)),
                      ("reason#", _I4, (n,))]  # fmt: skip
    for r, f in enumerate(head.features):
        layout.extend((f"{name}{r}", dt, (n,)) for name, dt in _RANK)
        layout.append((f"features{r}", _F8, (n, f)))
    a = _arrays(frames, layout)
    ranks = [BestMatches(**{name: a[f"{name}{r}"] for name, _ in _RANK}, features=a[f"features{r}"])
             for r in range(len(head.features))]  # fmt: skip
    names = None
    if head.names is not None:
        if not len(head.names.peptides) == len(head.names.proteins) == n:
            raise FrameError(f"a scored reply's names are not {n} peptides and their proteins")
        names = Names(head.names.peptides, head.names.proteins)
    return ScoredBatch(_rows(head.runs, a["run#"], "run"), a["scan"], a["precursor_mz"], a["rt"], ranks[0],
                       _rows(head.reasons, a["reason#"], "reason"), head.stages, names, _ids(head.native_id, n),
                       ranks[1:])  # fmt: skip


def _read_queries(head: _Queries, frames: Sequence[Frame]) -> QueryScores:
    n, q, k = head.n, head.q, head.k
    layout: Layout = [*((name, dt, (q,)) for name, dt in _QUERY), ("order", _I8, (q,)), ("cand", _I8, (q, k)),
                      ("prelim", _I4, (q, k)), *((name, _F8, (q, k)) for name in _STATS),
                      ("match_probability", _F8, (n,)), ("reason#", _I4, (n,))]  # fmt: skip
    a = _arrays(frames, layout)
    if q and (int(a["spectrum"].min()) < 0 or int(a["spectrum"].max()) >= n):
        raise FrameError("a query's spectrum is not one of the batch's")
    if a["cand"].size and int(a["cand"].min()) < -1:
        raise FrameError("a candidate below -1 (none)")
    queries = Queries(*(a[name] for name, _ in _QUERY))
    return QueryScores(queries, a["order"], a["cand"], a["prelim"], MatchStats(*(a[name] for name in _STATS)),
                       a["match_probability"], _rows(head.reasons, a["reason#"], "reason"), head.stages)  # fmt: skip


# ------------------------------------------------------------------ checks


def _size(frame: Frame) -> int:
    return memoryview(frame).nbytes


def _json(decoder: msgspec.json.Decoder[Any], frame: Frame) -> Any:
    """A header as ``decoder``'s type, its fields, types and bounds checked (msgspec, in C)."""
    try:
        return decoder.decode(frame)
    except (msgspec.DecodeError, TypeError) as e:  # (a ValidationError is a DecodeError)
        raise FrameError(f"a header that is not one: {str(e)[:200]}") from None


def _arrays(frames: Sequence[Frame], layout: Layout) -> dict[str, np.ndarray]:
    """Each frame as its array of ``layout`` (name, dtype, shape), its length checked first."""
    if len(frames) != len(layout):
        raise FrameError(f"{len(frames)} array frames where the header says {len(layout)}")
    out = {}
    for frame, (name, dtype, shape) in zip(frames, layout, strict=True):
        want = math.prod(shape) * dtype.itemsize
        if (got := _size(frame)) != want:
            raise FrameError(f"{name}: {got} bytes where the header says {want}")
        out[name] = np.frombuffer(frame, dtype=dtype).reshape(shape)
    return out


def _ids(ids: list[str], n: int) -> list[str]:
    """A batch's native ids: one a spectrum, or none."""
    if ids and len(ids) != n:
        raise FrameError(f"native_id: {len(ids)} ids for {n} spectra")
    return ids


def _rows(distinct: list[Any], at: np.ndarray, key: str) -> list[Any]:
    """A column `_tabled` made: each row's value of ``distinct``, by its index in ``at``."""
    if not len(at):
        return []
    lo, hi = int(at.min()), int(at.max())
    if lo < 0 or hi >= len(distinct):
        raise FrameError(f"{key}: an index past its {len(distinct)} values")
    return [distinct[0]] * len(at) if hi == 0 else list(map(distinct.__getitem__, at.tolist()))
