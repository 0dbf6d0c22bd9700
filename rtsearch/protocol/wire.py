"""Wire protocol v1: the ZeroMQ multipart frames between instrument, daemon and clients.

Spectrum message (instrument → daemon)::

    frame 0  b"spectrum"
    frame 1  header, UTF-8 JSON: v, run, scan, ms_level, rt, precursor_mz, charge, n, sent_ns,
             optional budget_ms, isolation_width, activation, precursor_intensity, charges
    frame 2  m/z, little-endian float64 × n, ascending
    frame 3  intensity, little-endian float32 × n

Control messages: ``run.start`` (header ``v``, ``run``, optional metadata) and ``run.end``
(``v``, ``run``, ``n_spectra``). Result message (daemon → clients): ``result`` and one
JSON frame. ``charges`` is an optional list of candidate precursor charges for
instruments (and ms2 files) that report several; ``charge`` alone is the usual case.

`decode` never raises: anything that is not a valid message becomes an
`Invalid` carrying a short ``code`` (a metric label) and a readable ``reason``,
plus the run and scan when they could be read, so the daemon can answer it.

Every value `decode` accepts is one every later stage takes (issue 67): each number within a range
(`MAX_RT`, `MAX_MZ`, `MAX_INTENSITY`, ...), each list and string bounded (`MAX_CHARGES`, `MAX_RUN_BYTES`, no
control characters), the header at most `MAX_HEADER_BYTES` and every frame at most `MAX_MESSAGE_BYTES`.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, get_args, overload

import numpy as np
import orjson

from rtsearch.matches import ResultMessage
from rtsearch.protocol.peaks import MAX_MZ, spectrum_problem
from rtsearch.protocol.topics import RESULT, RUN_END, RUN_START, SPECTRUM
from rtsearch.types import Spectrum

VERSION = 1
TOPICS = (SPECTRUM, RUN_START, RUN_END)
MAX_CHARGE = 10
# distinct candidate charges of one spectrum at most: each is searched, so a spectrum's cost grows with them (a list of
# 10,000 stalled the engine 7.9 s, issue 67); instruments and ms2 files give two or three
MAX_CHARGES = 8
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # every integer field fits a signed 64-bit integer
MAX_RUN_BYTES = 512  # a run name's UTF-8 bytes at most (it names files and MQTT topics)
MAX_BUDGET_MS = 3_600_000.0  # an hour: a longer per-spectrum budget is a mistake, not a budget
# |rt| at most, seconds (116 days; a run lasts hours). The run's end fits retention times by least squares over its
# PSMs (rtsearch/scoring/database/retention.py): one rt of 1e308 overflowed it to NaN features, and the run's end
# failed with an IndexError in the q-values (issue 67, S2). Negative times are taken (retention reads them as unknown).
MAX_RT = 1e7
_MIN_RT = -MAX_RT
MAX_INTENSITY = float(np.finfo(np.float32).max)  # a precursor's intensity at most: a peak's (float32) at most
# Every frame of a message at most, bytes: the ZMQ_MAXMSGSIZE of the sockets that read spectra where the daemon binds
# them (rtsearch/serve/intake/intake_process.py, door.py): ZeroMQ drops a peer that sends a larger frame before
# reading it (one 1 GB frame took the intake process to 2.1 GB), and the peer reconnects. Never where the daemon
# connects: ZeroMQ does not reconnect a connection it dropped so, and the daemon would be cut off its instrument. The
# largest legal frame is a spectra message's m/z (`rtsearch.protocol.batch`): 128 MiB, 16,777,216 peaks, 1,024 a row at
# MAX_COUNT.
MAX_MESSAGE_BYTES = 128 * 1024 * 1024
MAX_PEAKS = MAX_MESSAGE_BYTES // 8  # peaks of one spectrum at most: its m/z frame fits MAX_MESSAGE_BYTES
# A header of a spectrum or control message at most, bytes: ~200 in use; the largest legal one (every field at its
# longest: a 512-byte run and id, escaped as JSON, 8 charges) is under 4 kB
MAX_HEADER_BYTES = 65_536
# A larger header is refused, but up to this size still read for the run and scan it names, so that it is answered:
# parsing costs ~1 ms a MiB, and the parsed JSON up to ~20 times its bytes (a list of empty lists); beyond, counted
MAX_NAMED_HEADER_BYTES = 1024 * 1024

InvalidCode = Literal["frames", "topic", "header", "version", "field", "peaks"]
INVALID_CODES: tuple[InvalidCode, ...] = get_args(InvalidCode)


@dataclass(frozen=True, slots=True)
class SpectrumMessage:
    """A decoded, valid spectrum and its wire metadata."""

    spectrum: Spectrum
    sent_ns: int
    budget_ms: float | None = None


@dataclass(frozen=True, slots=True)
class RunStart:
    run: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunEnd:
    run: str
    n_spectra: int | None = None


@dataclass(frozen=True, slots=True)
class Invalid:
    """A message that could not be used; ``run``/``scan`` are set when they could be read."""

    code: InvalidCode
    reason: str
    run: str | None = None
    scan: int | None = None
    ms_level: int | None = None
    sent_ns: int | None = None

    @property
    def answerable(self) -> bool:
        """Whether it names a spectrum that gets an ``invalid`` result: a run and scan, and not MS1
        (MS1 spectra are counted, never answered)."""
        return self.run is not None and self.scan is not None and self.ms_level != 1


class RawSpectrum(NamedTuple):
    """A valid spectrum message's header fields and its peak bytes, peak values not yet checked
    (`decode` with ``peaks="raw"``; `rtsearch.protocol.peaks.peak_problems` checks them). ``budget_ms`` NaN: none
    given."""

    run: str
    scan: int
    ms_level: int
    rt: float
    precursor_mz: float
    precursor_intensity: float
    charges: tuple[int, ...]
    sent_ns: int
    budget_ms: float
    mz: bytes  # little-endian float64
    intensity: bytes  # little-endian float32
    native_id: str = ""  # header field ``id``: the spectrum's id in its file ("" when none came)


Message = SpectrumMessage | RunStart | RunEnd | Invalid


class _Bad(Exception):
    def __init__(self, code: InvalidCode, reason: str) -> None:
        super().__init__(reason)
        self.code: InvalidCode = code
        self.reason = reason


def _int(h: dict[str, Any], key: str, *, required: bool = True, minimum: int | None = None,
         maximum: int | None = None) -> int | None:  # fmt: skip
    v = h.get(key)
    if v is None:
        if required:
            raise _Bad("field", f"header field {key!r} is missing")
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad("field", f"header field {key!r} must be an integer, got {v!r}"[:200])
    if minimum is not None and v < minimum:
        raise _Bad("field", f"header field {key!r} must be >= {minimum}, got {v}"[:200])
    if maximum is not None and v > maximum:
        raise _Bad("field", f"header field {key!r} must be at most {maximum:,}, got {v}"[:200])
    if not INT_MIN <= v <= INT_MAX:
        raise _Bad("field", f"header field {key!r} must fit 64 bits, got {v}"[:200])
    return v


def bound_text(x: float) -> str:
    """A bound as a reason gives it: ``10,000,000``, ``3.40282e+38``."""
    return f"{x:,.0f}" if x.is_integer() and abs(x) < 1e15 else f"{x:g}"


def _num(h: dict[str, Any], key: str, *, required: bool = True, positive: bool = False, low: float = -math.inf,
         high: float = math.inf) -> float | None:  # fmt: skip
    """Header field ``key``: a finite number within ``low..high`` (above 0 when ``positive``)."""
    v = h.get(key)
    if v is None:
        if required:
            raise _Bad("field", f"header field {key!r} is missing")
        return None
    try:
        finite = not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)
    except OverflowError:  # a JSON integer too large for a float
        finite = False
    if not finite:
        raise _Bad("field", f"header field {key!r} must be a finite number, got {v!r}"[:200])
    if positive and v <= 0:
        raise _Bad("field", f"header field {key!r} must be positive, got {v}")
    if v < low:
        raise _Bad("field", f"header field {key!r} must be at least {bound_text(low)}, got {float(v):g}")
    if v > high:
        raise _Bad("field", f"header field {key!r} must be at most {bound_text(high)}, got {float(v):g}")
    return float(v)


_NAMES_OK: set[str] = set()  # run names found valid (at most 4,096): each of a run's messages pays one lookup
# C0 controls, DEL and C1 controls: a run's name names files and MQTT topics (MQTT forbids NUL and advises against the
# rest), it and a native id are written to results files (TSV) and logs, where NUL, ESC or CSI (U+009B) do harm
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
NAME_RULE = f"a non-empty UTF-8 string of at most {MAX_RUN_BYTES} bytes without control characters"


def _text_problem(v: str) -> str | None:
    """Why ``v`` cannot be a run's name or a native id (``None``: it can, or it is empty)."""
    # the usual name or id: ASCII (a flag of the string in CPython), its length its UTF-8 size, and printable ASCII
    # holds no C0 control nor DEL
    if v.isascii() and len(v) <= MAX_RUN_BYTES and v.isprintable():
        return None
    try:
        size = len(v.encode("utf-8"))  # a lone surrogate (JSON "\ud800") cannot be encoded
    except UnicodeEncodeError:
        return "is not UTF-8"
    if size > MAX_RUN_BYTES:
        return f"is longer than {MAX_RUN_BYTES} UTF-8 bytes"
    # a printable string holds none (the usual one: one call); one that is not may still hold none (U+00A0)
    if not v.isprintable() and (c := _CONTROL.search(v)) is not None:
        return f"holds the control character U+{ord(c.group()):04X}"
    return None


def _run_name(v: Any) -> str | None:
    """``v`` if it can name a run: a non-empty string of at most `MAX_RUN_BYTES` UTF-8 bytes, no control
    characters."""
    if v.__class__ is str and v in _NAMES_OK:
        return str(v)
    if not isinstance(v, str) or not v or _text_problem(v) is not None:
        return None
    if len(_NAMES_OK) < 4096:
        _NAMES_OK.add(v)
    return v


_INT_TEXT = re.compile(r"\s*[+-]?[0-9]{1,20}\s*\Z")


def _some_int(v: Any, minimum: int = INT_MIN) -> int | None:
    """An integer ``v`` stands for, to name a spectrum in an ``invalid`` answer (``12``, ``12.0``, ``"12"``)."""
    if isinstance(v, bool):
        return None
    # a float only while exact (JSON integers beyond 64 bits come back from orjson as rounded floats)
    if (isinstance(v, float) and v.is_integer() and abs(v) < 2**53) or (isinstance(v, str) and _INT_TEXT.match(v)):
        v = int(v)
    return v if isinstance(v, int) and minimum <= v <= INT_MAX else None


def _header(frame: bytes) -> dict[str, Any]:
    try:
        h = orjson.loads(frame)  # several times faster than json: this runs once per message
    except orjson.JSONDecodeError:
        # what orjson refuses but Python's json reads (NaN literals, integers beyond 64 bits) is then
        # refused field by field, naming the field, and the run and scan stay readable
        try:
            h = json.loads(frame.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise _Bad("header", "header is not UTF-8 JSON") from None
    if not isinstance(h, dict):
        raise _Bad("header", "header is not a JSON object")
    return h


@overload
def decode(frames: Sequence[Any], *, peaks: Literal["checked"] = "checked") -> Message: ...
@overload
def decode(frames: Sequence[Any], *, peaks: Literal["raw"]) -> Message | RawSpectrum: ...
def decode(frames: Sequence[Any], *, peaks: Literal["checked", "raw"] = "checked") -> Message | RawSpectrum:
    """Decode one multipart message of bytes-like frames (bytes, ``zmq.Frame``); never raises.

    See the module docstring. With ``peaks="raw"`` a valid spectrum message comes back as a
    `RawSpectrum`: header fields checked, peak values not (their byte counts are), for readers
    that check many spectra at once with `rtsearch.protocol.peaks.peak_problems` (the intake process).
    """
    if not frames or len(frames) < 2:
        return Invalid("frames", f"expected a topic and a header frame, got {len(frames) if frames else 0} frame(s)")
    topic = bytes(frames[0])
    run: str | None = None
    h: dict[str, Any] = {}
    try:
        if (size := len(frames[1])) > MAX_HEADER_BYTES:  # sized before it is copied
            h = _named_by(frames[1], size)
            run = _run_name(h.get("run"))
            raise _Bad("header", f"header is {size:,} bytes, more than {MAX_HEADER_BYTES:,}")
        h = _header(bytes(frames[1]))
        run = _run_name(h.get("run"))
        if topic not in TOPICS:
            raise _Bad("topic", f"unknown topic {topic[:40]!r}")
        if h.get("v") != VERSION:
            raise _Bad("version", f"unsupported protocol version {h.get('v')!r} (this daemon speaks v{VERSION})"[:200])
        if run is None:
            raise _Bad("field", _run_reason(h.get("run")))
        if topic == RUN_START:
            return RunStart(run, {k: v for k, v in h.items() if k not in ("v", "run")})
        if topic == RUN_END:
            return RunEnd(run, _int(h, "n_spectra", required=False, minimum=0))
        return _spectrum(frames, h, run, peaks == "raw")
    except _Bad as e:
        # what names the message, read leniently (only now: a valid one pays nothing), so that even a malformed
        # one can be answered
        get = h.get
        return Invalid(e.code, e.reason, run, _some_int(get("scan")), _some_int(get("ms_level")),
                       _some_int(get("sent_ns"), 0))  # fmt: skip


def _named_by(head: Any, size: int) -> dict[str, Any]:
    """An oversized header (a frame of ``size`` bytes) read only for what names its spectrum (run, scan, ...): ``{}``
    beyond `MAX_NAMED_HEADER_BYTES` (not even copied) or when it is no JSON object."""
    try:
        return _header(bytes(head)) if size <= MAX_NAMED_HEADER_BYTES else {}
    except _Bad:
        return {}


def _run_reason(v: Any) -> str:
    """Why ``v`` names no run (`_run_name` refused it)."""
    why = _text_problem(v) if isinstance(v, str) and v else None
    return f"header field 'run' must be {NAME_RULE}" + (f": it {why}" if why else "")


def _spectrum(frames: Sequence[Any], h: dict[str, Any], run: str, raw: bool) -> SpectrumMessage | RawSpectrum:
    # the usual message takes the first branch of each line (the bounds folded into its test); anything else goes
    # through the checks
    get = h.get
    scan = v if type(v := get("scan")) is int and INT_MIN <= v <= INT_MAX else _int(h, "scan")
    ms_level = v if type(v := get("ms_level")) is int and 1 <= v <= 255 else _int(h, "ms_level", minimum=1)
    if ms_level is not None and ms_level > 255:
        raise _Bad("field", f"header field 'ms_level' must be 1..255, got {ms_level}")
    rt = v if type(v := get("rt")) is float and _MIN_RT <= v <= MAX_RT else _num(h, "rt", low=_MIN_RT, high=MAX_RT)
    n = v if type(v := get("n")) is int and 0 <= v <= MAX_PEAKS else _int(h, "n", minimum=0, maximum=MAX_PEAKS)
    sent_ns = v if type(v := get("sent_ns")) is int and 0 <= v <= INT_MAX else _int(h, "sent_ns", minimum=0)
    budget = None if (v := get("budget_ms")) is None else _num(h, "budget_ms", positive=True, high=MAX_BUDGET_MS)
    assert scan is not None and ms_level is not None and rt is not None and n is not None and sent_ns is not None
    precursor = 0.0
    charges: tuple[int, ...] = ()
    if ms_level >= 2:
        v = get("precursor_mz")
        precursor = v if type(v) is float and 0 < v <= MAX_MZ else (_num(h, "precursor_mz", positive=True,
                                                                           high=MAX_MZ) or 0.0)  # fmt: skip
        charge = v if type(v := get("charge")) is int and v >= 0 else (_int(h, "charge", minimum=0) or 0)
        if charge > MAX_CHARGE:
            raise _Bad("field", f"header field 'charge' must be 0..{MAX_CHARGE}, got {charge}")
        listed = h.get("charges")
        if listed is not None:
            charges = _charges(listed)
        elif charge:
            charges = (charge,)
    pi = 0.0 if (v := get("precursor_intensity")) is None else (
        v if type(v) is float and 0 <= v <= MAX_INTENSITY
        else (_num(h, "precursor_intensity", low=0.0, high=MAX_INTENSITY) or 0.0))  # fmt: skip
    native_id = "" if (v := get("id")) is None else _native_id(v)
    if len(frames) != 4:
        raise _Bad("frames", f"a spectrum has 4 frames, got {len(frames)}")
    mz_f, in_f = frames[2], frames[3]
    if len(mz_f) != 8 * n or len(in_f) != 4 * n:  # sized before they are copied: a frame of another size never is
        raise _Bad("peaks", f"peak frames hold {len(mz_f)} and {len(in_f)} bytes, header says n={n}")
    mz_b, in_b = bytes(mz_f), bytes(in_f)
    if raw:
        return RawSpectrum(run, scan, ms_level, rt, precursor, pi, charges, sent_ns,
                           math.nan if budget is None else budget, mz_b, in_b, native_id)  # fmt: skip
    # read-only views of the frames (no copy); the engine copies when it packs a batch
    mz = np.frombuffer(mz_b, dtype="<f8")
    inten = np.frombuffer(in_b, dtype="<f4")
    if why := spectrum_problem(mz, inten):
        raise _Bad("peaks", why)
    sp = Spectrum(run, scan, ms_level, mz, inten, precursor, charges, rt, pi, native_id=native_id)
    return SpectrumMessage(sp, sent_ns, budget)


def _charges(listed: Any) -> tuple[int, ...]:
    """Header field ``charges``: at most `MAX_CHARGES` distinct integers 1..`MAX_CHARGE` (the length is checked
    first: a list of 10,000 is refused without reading it)."""
    short = isinstance(listed, list) and len(listed) <= MAX_CHARGES
    if short and all(type(z) is int and 1 <= z <= MAX_CHARGE for z in listed) and len(set(listed)) == len(listed):
        return tuple(listed)
    got = f", got {len(listed):,} values" if isinstance(listed, list) else ""
    raise _Bad("field", f"header field 'charges' must be a list of at most {MAX_CHARGES} distinct integers "
               f"1..{MAX_CHARGE}{got}")  # fmt: skip


def _native_id(v: Any, field: str = "id") -> str:
    """A native id (header ``id``, or one of a batched message's ``ids``): as a run's name, a UTF-8 string of at
    most `MAX_RUN_BYTES` bytes without control characters (it goes into results files), or empty."""
    if v.__class__ is not str:
        raise _Bad("field", f"header field {field!r} must be a string")
    # the usual id passes `_text_problem`'s first test: made here, without the call
    if not (v.isascii() and len(v) <= MAX_RUN_BYTES and v.isprintable()) and (why := _text_problem(v)) is not None:
        raise _Bad("field", f"header field {field!r} {why}")
    return str(v)


def encode_spectrum(
    sp: Spectrum, *, sent_ns: int | None = None, budget_ms: float | None = None, **extra: Any
) -> list[bytes]:
    """Frames of one spectrum message (``extra``: optional header fields such as ``activation``)."""
    mz = np.ascontiguousarray(sp.mz, dtype="<f8")
    inten = np.ascontiguousarray(sp.intensity, dtype="<f4")
    header: dict[str, Any] = {
        "v": VERSION, "run": sp.run, "scan": int(sp.scan), "ms_level": int(sp.ms_level), "rt": float(sp.rt),
        "precursor_mz": float(sp.precursor_mz), "charge": int(sp.charges[0]) if len(sp.charges) == 1 else 0,
        "n": int(mz.shape[0]), "sent_ns": time.time_ns() if sent_ns is None else int(sent_ns),
    }  # fmt: skip
    if len(sp.charges) > 1:
        header["charges"] = [int(z) for z in sp.charges]
    if sp.precursor_intensity:
        header["precursor_intensity"] = float(sp.precursor_intensity)
    if sent_id(sp):
        header["id"] = sp.native_id
    if budget_ms is not None:
        header["budget_ms"] = float(budget_ms)
    header.update(extra)
    return [SPECTRUM, orjson.dumps(header, option=orjson.OPT_SERIALIZE_NUMPY), mz.tobytes(), inten.tobytes()]


def sent_id(sp: Spectrum) -> bool:
    """Whether ``sp``'s native id goes on the wire: not when it is the ``scan=N`` every receiver assumes."""
    return bool(sp.native_id) and sp.native_id != f"scan={sp.scan}"


def encode_run_start(run: str, **meta: Any) -> list[bytes]:
    return [RUN_START, json.dumps({"v": VERSION, "run": run, **meta}).encode()]


def encode_run_end(run: str, n_spectra: int) -> list[bytes]:
    return [RUN_END, json.dumps({"v": VERSION, "run": run, "n_spectra": int(n_spectra)}).encode()]


def encode_result(result: ResultMessage) -> list[bytes]:
    """Frames of one result message (``v`` is added to a copy; NaN and infinities become null)."""
    return [RESULT, result_body(result.copy())]


def result_body(result: ResultMessage) -> bytes:
    """The JSON frame of a result message, adding ``v`` to ``result`` itself.

    The daemon's hot path: no copy of the dict (`encode_result` copies). NaN and infinities
    become null.
    """
    result["v"] = VERSION
    return orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY)


def decode_result(frames: Sequence[bytes]) -> dict[str, Any]:
    """The JSON object of a result message; raises ``ValueError`` on anything else."""
    if len(frames) != 2 or bytes(frames[0]) != RESULT:
        raise ValueError("not a result message")
    body = orjson.loads(bytes(frames[1]))
    if not isinstance(body, dict) or body.get("v") != VERSION:
        raise ValueError("result message of another protocol version")
    return body
