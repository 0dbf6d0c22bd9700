"""What the wire protocol tests share (``tests/unit/test_wire*.py``, ``test_chunks.py``,
``test_hostile_messages.py``): header helpers, real messages to start from and the hypothesis strategies that
damage them. Their real spectra are the ``ms2`` and ``sp`` fixtures of ``tests/unit/conftest.py``."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from hypothesis import strategies as st

from rtsearch.protocol.wire import (
    RESULT,
    RUN_END,
    RUN_START,
    SPECTRUM,
    encode_run_end,
    encode_run_start,
    encode_spectrum,
)
from rtsearch.types import Spectrum


def _header(frames: list[bytes]) -> dict[str, Any]:
    return json.loads(frames[1])


def _with_header(frames: list[bytes], **changes: Any) -> list[bytes]:
    """``frames`` with header fields replaced (a value of ``...`` deletes the field)."""
    h = _header(frames)
    for k, v in changes.items():
        if v is ...:
            h.pop(k, None)
        else:
            h[k] = v
    return [frames[0], json.dumps(h).encode(), *frames[2:]]


_hostile = st.sampled_from([0, -1, 1, 2, 11, 2**63, -(2**63), 10**400, -(10**400), math.nan, math.inf, True, "", []])
_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    _hostile,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
_json_value = st.recursive(
    _json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=10,
)
_keys = st.sampled_from(
    ["v", "run", "scan", "ms_level", "rt", "precursor_mz", "charge", "charges", "n", "sent_ns", "budget_ms",
     "precursor_intensity", "n_spectra", "isolation_width", "activation", "other"]
)  # fmt: skip


@st.composite
def _mutated_message(draw: st.DrawFn, base: list[list[bytes]]) -> list[bytes]:
    frames = list(draw(st.sampled_from(base)))
    h = json.loads(frames[1])
    for _ in range(draw(st.integers(0, 4))):
        key = draw(_keys)
        if draw(st.booleans()):
            h.pop(key, None)
        else:
            h[key] = draw(st.one_of(_hostile, _json_value))
    header = json.dumps(h).encode()
    if draw(st.integers(0, 4)) == 0:  # byte-level damage of the header
        cut = draw(st.integers(0, len(header)))
        header = header[:cut] + draw(st.binary(max_size=4)) + header[cut + draw(st.integers(0, 3)) :]
    frames[1] = header
    if draw(st.booleans()):
        frames[0] = draw(st.sampled_from([SPECTRUM, RUN_START, RUN_END, RESULT, b"", b"x"]))
    for i in range(2, len(frames)):
        if draw(st.integers(0, 2)) == 0:
            frames[i] = frames[i][: draw(st.integers(0, len(frames[i])))]
        if draw(st.integers(0, 5)) == 0 and frames[i]:  # overwrite some bytes (NaN, disorder, negatives)
            at = draw(st.integers(0, len(frames[i]) - 1))
            frames[i] = frames[i][:at] + draw(st.binary(min_size=1, max_size=8)) + frames[i][at + 1 :]
    k = draw(st.integers(0, 3))
    if k == 1:
        frames = frames[: draw(st.integers(0, len(frames)))]
    elif k == 2:
        frames = [*frames, *draw(st.lists(st.binary(max_size=16), max_size=2))]
    return frames


def _base_messages(ms2: list[Spectrum]) -> list[list[bytes]]:
    small = [dataclasses.replace(s, mz=s.mz[:6], intensity=s.intensity[:6]) for s in ms2]
    multi = dataclasses.replace(small[1], charges=(2, 3), precursor_intensity=1e6)
    ms1 = dataclasses.replace(small[2], ms_level=1, precursor_mz=0.0, charges=())
    return [
        *(encode_spectrum(s, sent_ns=1, budget_ms=20.0) for s in (*small, multi, ms1)),
        encode_run_start("r", instrument="x"),
        encode_run_end("r", 3),
    ]
