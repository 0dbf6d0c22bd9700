"""The wire protocol's `decode` never raises, whatever frames it is given (hypothesis, seeded): arbitrary
frames, real messages (the ``ms2`` and ``sp`` fixtures of ``conftest.py``) mutated field by field and byte by byte."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtsearch.protocol.wire import (
    INVALID_CODES,
    MAX_CHARGE,
    MAX_CHARGES,
    MAX_INTENSITY,
    MAX_MZ,
    MAX_RT,
    Invalid,
    RunEnd,
    RunStart,
    SpectrumMessage,
    decode,
    encode_spectrum,
)
from tests.wire_cases import _base_messages, _hostile, _json_value, _keys, _mutated_message, _with_header


def _check_decoded(frames: list[bytes]) -> SpectrumMessage | RunStart | RunEnd | Invalid:
    """Decode (which must not raise) and check the message is well formed."""
    msg = decode(frames)
    assert isinstance(msg, SpectrumMessage | RunStart | RunEnd | Invalid)
    if isinstance(msg, Invalid):
        assert msg.code in INVALID_CODES and isinstance(msg.reason, str)
        assert msg.run is None or (isinstance(msg.run, str) and msg.run)
        assert msg.scan is None or isinstance(msg.scan, int)
    if isinstance(msg, SpectrumMessage):
        s = msg.spectrum
        assert s.mz.shape == s.intensity.shape
        assert np.isfinite(s.mz).all() and np.isfinite(s.intensity).all() and (s.intensity >= 0).all()
        assert (np.diff(s.mz) >= 0).all()
        assert math.isfinite(s.rt) and all(1 <= z <= MAX_CHARGE for z in s.charges)
        # within every bound later stages rely on (issue 67)
        assert -MAX_RT <= s.rt <= MAX_RT and len(set(s.charges)) == len(s.charges) <= MAX_CHARGES
        assert 0 <= s.precursor_mz <= MAX_MZ and 0 <= s.precursor_intensity <= MAX_INTENSITY
        assert not s.mz.size or (s.mz[0] >= 0 and s.mz[-1] <= MAX_MZ)
    return msg


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.binary(max_size=64), max_size=6))
def test_fuzz_decode_arbitrary_frames(frames) -> None:
    _check_decoded(frames)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(draws=st.data())
def test_fuzz_decode_mutated_messages(ms2, draws) -> None:
    frames = draws.draw(_mutated_message(_base_messages(ms2)))
    _check_decoded(frames)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(draws=st.data())
def test_fuzz_decode_header_fields(sp, draws) -> None:
    """Intact peak frames, 1-3 header fields of a valid spectrum set to odd JSON values."""
    frames = encode_spectrum(dataclasses.replace(sp, mz=sp.mz[:5], intensity=sp.intensity[:5]), sent_ns=1)
    changes = draws.draw(st.dictionaries(_keys, st.one_of(_hostile, _json_value), min_size=1, max_size=3))
    msg = _check_decoded(_with_header(frames, **changes))
    if isinstance(msg, Invalid):
        # run and scan come back whenever the header still holds them
        assert msg.run == ("Ecoli_MS2_small" if "run" not in changes else msg.run)
        assert msg.scan == (11461 if "scan" not in changes else msg.scan)
