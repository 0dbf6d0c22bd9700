"""Wire protocol v1, batched topics: many spectra in one message, many answers in one message.

For bulk sources (a recorded run replayed as fast as it goes, a bridge relaying an
instrument's buffer) one ZeroMQ message and one JSON header per spectrum cost more than the
scoring. These topics carry a block of spectra column by column, and answer them, when the
sender asks, in one message per batch of answers. They are additions to v1
(`rtsearch.protocol.wire`): old receivers ignore topics they do not know, and the batched answer
topic is not prefixed by ``result``, so a subscriber to ``result`` never sees it.

Spectra message (sender → daemon), 10 frames::

    frame 0  b"spectra"
    frame 1  header, UTF-8 JSON: v, run, count, sent_ns, optional budget_ms, answer ("each" | "batch"),
             ids (each spectrum's native id, a list of count strings)
    frame 2  scan          little-endian int64   × count
    frame 3  ms_level      uint8                 × count (1..255)
    frame 4  rt            little-endian float64 × count (seconds)
    frame 5  precursor_mz  little-endian float64 × count (ignored for MS1)
    frame 6  charge        uint8                 × count (0: unknown; the daemon tries its charges)
    frame 7  n             little-endian uint32  × count (peaks of each spectrum)
    frame 8  m/z           little-endian float64 × sum(n), each spectrum's ascending, concatenated
    frame 9  intensity     little-endian float32 × sum(n)

Answers to a spectra message with ``answer: "batch"`` (daemon → clients), 3 frames::

    frame 0  b"batch.results"
    frame 1  header, UTF-8 JSON: {"v": 1, "run": ..., "count": k} (a client counts answers without parsing them)
    frame 2  UTF-8 JSON array of the k results, each the object a ``result`` message would carry

Bounds (issue 67): at most `MAX_COUNT` rows, a header of at most `MAX_SPECTRA_HEADER_BYTES`, peak frames of at most
`rtsearch.protocol.wire.MAX_MESSAGE_BYTES`; each row's values within the ranges of a spectrum message's.

`decode_spectra` never raises: a message whose structure is broken becomes an
`rtsearch.protocol.wire.Invalid` (counted, not answered: no scan can be trusted, unless its header is a
spectrum message's, naming one scan); a message whose
columns are readable but some rows (or its peak frames) are not becomes a `SpectraBlock` with
those rows in ``problems``, each answered ``invalid``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import orjson

from rtsearch.matches import ResultMessage
from rtsearch.protocol.topics import BATCH_RESULTS, SPECTRA
from rtsearch.protocol.wire import (
    MAX_BUDGET_MS,
    MAX_CHARGE,
    MAX_HEADER_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_MZ,
    MAX_RT,
    MAX_RUN_BYTES,
    VERSION,
    Invalid,
    InvalidCode,
    _Bad,
    _header,
    _int,
    _native_id,
    _num,
    _run_name,
    _run_reason,
    _some_int,
    bound_text,
    sent_id,
)
from rtsearch.types import Spectrum

Answer = Literal["each", "batch"]
ANSWERS: tuple[Answer, ...] = get_args(Answer)
# spectra in one message at most: the daemon takes a message whole, and a few thousand is the useful range (rtsearch-sim
# sends 2,048, the bulk benchmarks up to 4,096); 16,384 keeps the largest legal header (every row's id at its
# longest, MAX_SPECTRA_HEADER_BYTES) at 24 MiB and leaves its rows 1,024 peaks each within MAX_MESSAGE_BYTES
MAX_COUNT = 16_384
# one native id's bytes in the header's compact JSON at most: 3 per UTF-8 byte (a 2-byte character escaped as
# \u00e9), its quotes and a separator (", ")
MAX_ID_JSON_BYTES = 3 * MAX_RUN_BYTES + 4
MAX_SPECTRA_HEADER_BYTES = MAX_HEADER_BYTES + MAX_COUNT * MAX_ID_JSON_BYTES  # a spectra message's header at most
assert MAX_SPECTRA_HEADER_BYTES <= MAX_MESSAGE_BYTES
# the column frames 2..7: name and dtype
COLUMNS: tuple[tuple[str, str], ...] = (
    ("scan", "<i8"), ("ms_level", "u1"), ("rt", "<f8"), ("precursor_mz", "<f8"), ("charge", "u1"), ("n", "<u4"),
)  # fmt: skip
N_FRAMES = 2 + len(COLUMNS) + 2


@dataclass(frozen=True, slots=True)
class SpectraBlock:
    """A decoded spectra message, column by column; peaks of row ``i`` are ``[offsets[i], offsets[i + 1])``.

    ``problems`` are the rows to answer ``invalid`` (``(row, code, reason)``, in row order: code ``field`` for a
    bad column value, ``peaks`` when the peak frames do not hold the ``n`` column's peaks), with their fields as
    sent; peak values are not checked here (`rtsearch.protocol.peaks.peak_problems` checks them for many at once).
    """

    run: str
    sent_ns: int
    budget_ms: float  # NaN: none given
    answer: Answer
    scan: np.ndarray  # int64
    ms_level: np.ndarray  # int64
    rt: np.ndarray  # float64
    precursor_mz: np.ndarray  # float64, 0 for MS1
    charge: np.ndarray  # int64, 0 unknown
    offsets: np.ndarray  # int64 [count + 1]
    mz: np.ndarray  # float64
    intensity: np.ndarray  # float32
    problems: list[tuple[int, InvalidCode, str]]
    ids: list[str] = field(default_factory=list)  # [count] native ids (header ``ids``); [] when none came

    def __len__(self) -> int:
        return int(self.scan.shape[0])


def decode_spectra(frames: Sequence[Any]) -> SpectraBlock | Invalid:
    """Decode one ``spectra`` message of bytes-like frames; never raises (see the module docstring)."""
    run: str | None = None
    sent_ns: int | None = None
    scan: int | None = None
    ms_level: int | None = None
    try:
        if len(frames) < 2:
            raise _Bad("frames", f"expected a topic and a header frame, got {len(frames)} frame(s)")
        if (size := len(frames[1])) > MAX_SPECTRA_HEADER_BYTES:  # not read (nor copied): none of its rows is named
            raise _Bad("header", f"header is {size:,} bytes, more than {MAX_SPECTRA_HEADER_BYTES:,}")
        h = _header(bytes(frames[1]))
        run = _run_name(h.get("run"))
        # a spectrum message's header sent on this topic names its spectrum: it is answered, as v1 answers
        # any malformed message that names one
        scan, ms_level = _some_int(h.get("scan")), _some_int(h.get("ms_level"))
        if h.get("v") != VERSION:
            raise _Bad("version", f"unsupported protocol version {h.get('v')!r} (this daemon speaks v{VERSION})"[:200])
        if run is None:
            raise _Bad("field", _run_reason(h.get("run")))
        sent_ns = _int(h, "sent_ns", minimum=0)
        count = _int(h, "count", minimum=0)
        assert count is not None and sent_ns is not None
        if count > MAX_COUNT:
            raise _Bad("field", f"header field 'count' must be at most {MAX_COUNT:,}, got {count:,}")
        budget = _num(h, "budget_ms", required=False, positive=True, high=MAX_BUDGET_MS)
        answer = h.get("answer", "each")
        if answer not in ANSWERS:
            raise _Bad("field", f"header field 'answer' must be 'each' or 'batch', got {answer!r}"[:200])
        ids = h.get("ids", [])
        if not (isinstance(ids, list) and len(ids) in (0, count)):
            raise _Bad("field", "header field 'ids' must be a list of 'count' strings")
        if ids and not _plain(ids):
            for i in ids:
                _native_id(i, "ids")  # raises, with the reason of the first id refused
        if len(frames) != N_FRAMES:
            raise _Bad("frames", f"a spectra message has {N_FRAMES} frames, got {len(frames)}")
        if (big := max(len(frames[-2]), len(frames[-1]))) > MAX_MESSAGE_BYTES:  # (what the daemon's socket refuses)
            raise _Bad("frames", f"a peak frame holds {big:,} bytes, more than {MAX_MESSAGE_BYTES:,}")
        cols = {}
        for k, (name, dtype) in enumerate(COLUMNS):
            b = bytes(frames[2 + k])
            size = np.dtype(dtype).itemsize
            if len(b) != size * count:
                raise _Bad("frames", f"column {name!r} holds {len(b)} bytes, header says count={count}")
            cols[name] = np.frombuffer(b, dtype=dtype)
    except _Bad as e:
        return Invalid(e.code, e.reason, run, scan, ms_level, sent_ns)
    return _block(frames, run, sent_ns, budget, answer, cols, ids)


_ASCII_CONTROLS = bytes(range(32)) + b"\x7f"


def _plain(ids: list[Any]) -> bool:
    """Whether every id is an ASCII string of at most `MAX_RUN_BYTES` without control characters (the usual ids,
    each a valid native id: `rtsearch.protocol.wire._native_id`), checked at once: 2,048 mzML ids in ~140 us, against
    ~490 us one by one (str.isprintable reads 3 ns a character, bytes.translate 0.7)."""
    try:
        joined = "".join(ids)
    except TypeError:  # not all strings
        return False
    if not joined.isascii():
        return False
    text = joined.encode("ascii")
    return len(text.translate(None, _ASCII_CONTROLS)) == len(text) and max(map(len, ids)) <= MAX_RUN_BYTES


def _block(frames: Sequence[Any], run: str, sent_ns: int, budget: float | None, answer: Answer,
           cols: dict[str, np.ndarray], ids: list[str]) -> SpectraBlock:  # fmt: skip
    level = cols["ms_level"].astype(np.int64)
    prec = cols["precursor_mz"].astype(np.float64)
    charge = cols["charge"].astype(np.int64)
    n = cols["n"].astype(np.int64)
    offsets = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(n, out=offsets[1:])
    ms2 = level >= 2
    reason = np.full(len(n), "", dtype=object)
    rt = cols["rt"]
    checks = (  # NaN fails every comparison: refused by the ranges
        (level < 1, "column 'ms_level' must be 1..255"),
        (~((rt >= -MAX_RT) & (rt <= MAX_RT)), f"column 'rt' must be a finite number within ±{bound_text(MAX_RT)}"),
        (ms2 & ~((prec > 0) & (prec <= MAX_MZ)),
         f"column 'precursor_mz' must be a positive number of at most {bound_text(MAX_MZ)} (MS2)"),
        (ms2 & (charge > MAX_CHARGE), f"column 'charge' must be 0..{MAX_CHARGE}"),
    )  # fmt: skip
    for flags, why in reversed(checks):  # the first failing check gives the reason
        reason[flags] = why
    mz_f, in_f = frames[-2], frames[-1]
    total = int(offsets[-1])
    code: InvalidCode = "field"
    if len(mz_f) != 8 * total or len(in_f) != 4 * total:  # sized before they are copied
        code = "peaks"
        reason[:] = f"peak frames hold {len(mz_f)} and {len(in_f)} bytes, the 'n' column says {total} peaks"
        offsets[:] = 0
        mz, inten = np.zeros(0), np.zeros(0, np.float32)
    else:
        mz, inten = np.frombuffer(bytes(mz_f), dtype="<f8"), np.frombuffer(bytes(in_f), dtype="<f4")
    problems = [(int(i), code, str(reason[i])) for i in np.flatnonzero(reason != "")]
    prec = np.where(ms2, prec, 0.0)
    return SpectraBlock(run, sent_ns, math.nan if budget is None else budget, answer, cols["scan"].astype(np.int64),
                        level, cols["rt"].astype(np.float64), prec, charge, offsets, mz, inten, problems,
                        ids)  # fmt: skip


def encode_spectra(
    run: str, spectra: Sequence[Spectrum], *, sent_ns: int, budget_ms: float | None = None,
    answer: Answer = "each",
) -> list[bytes]:  # fmt: skip
    """Frames of one spectra message holding ``spectra`` (a spectrum with several candidate charges is sent
    with charge 0: the daemon tries its own).

    Raises ``ValueError`` for more than `MAX_COUNT` spectra or more peaks than a frame of `MAX_MESSAGE_BYTES`
    holds: the daemon would refuse such a message, or drop the connection it came on, unanswered.
    """
    if len(spectra) > MAX_COUNT:
        raise ValueError(f"{len(spectra):,} spectra: a spectra message holds at most {MAX_COUNT:,}")
    if (peaks := sum(s.mz.shape[0] for s in spectra)) * 8 > MAX_MESSAGE_BYTES:
        raise ValueError(f"{peaks:,} peaks: a spectra message holds at most {MAX_MESSAGE_BYTES // 8:,}")
    header: dict[str, Any] = {"v": VERSION, "run": run, "count": len(spectra), "sent_ns": int(sent_ns)}
    if budget_ms is not None:
        header["budget_ms"] = float(budget_ms)
    if answer != "each":
        header["answer"] = answer
    if any(sent_id(s) for s in spectra):
        header["ids"] = [s.native_id if sent_id(s) else "" for s in spectra]
    mz = [np.asarray(s.mz, dtype="<f8") for s in spectra]
    inten = [np.asarray(s.intensity, dtype="<f4") for s in spectra]
    columns = (
        [s.scan for s in spectra], [s.ms_level for s in spectra], [s.rt for s in spectra],
        [s.precursor_mz if s.ms_level >= 2 else 0.0 for s in spectra],
        [s.charges[0] if len(s.charges) == 1 else 0 for s in spectra], [len(m) for m in mz],
    )  # fmt: skip
    body = [np.asarray(c, dtype=dtype).tobytes() for c, (_, dtype) in zip(columns, COLUMNS, strict=True)]
    peaks = [np.concatenate(mz).tobytes() if mz else b"", np.concatenate(inten).tobytes() if inten else b""]
    return [SPECTRA, orjson.dumps(header), *body, *peaks]


def encode_batch_results(run: str, results: Sequence[ResultMessage]) -> list[bytes]:
    """Frames of a ``batch.results`` message (each result already carries its ``v`` and stamps)."""
    head = orjson.dumps({"v": VERSION, "run": run, "count": len(results)})
    return [BATCH_RESULTS, head, orjson.dumps(results, option=orjson.OPT_SERIALIZE_NUMPY)]


def batch_results_count(frames: Sequence[Any]) -> int:
    """How many results a ``batch.results`` message carries, from its header alone (0 for anything else)."""
    try:
        head = orjson.loads(bytes(frames[1]))
        return int(head["count"]) if len(frames) == 3 and head.get("v") == VERSION else 0
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError):
        return 0


def decode_batch_results(frames: Sequence[bytes]) -> list[dict[str, Any]]:
    """The result objects of a ``batch.results`` message; raises ``ValueError`` on anything else."""
    if len(frames) != 3 or bytes(frames[0]) != BATCH_RESULTS:
        raise ValueError("not a batch.results message")
    head, body = orjson.loads(bytes(frames[1])), orjson.loads(bytes(frames[2]))
    if not isinstance(head, dict) or head.get("v") != VERSION or not isinstance(body, list):
        raise ValueError("batch.results message of another protocol version")
    if head.get("count") != len(body):
        raise ValueError(f"batch.results header says {head.get('count')!r} results, the message holds {len(body)}")
    return body
