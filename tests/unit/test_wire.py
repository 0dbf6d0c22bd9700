"""Tests for the wire protocol v1 (`rtsearch.protocol.wire`).

Round trips use real MS2 spectra from ``ecoli-small/Ecoli_MS2_small.mzML``
(the ``ms2`` and ``sp`` fixtures of ``conftest.py``); every invalid case checks its ``code`` and that the run
and scan are recovered when the header holds them. The fuzz of `decode` is in
``test_wire_fuzz.py``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest

from rtsearch.protocol.wire import (
    INVALID_CODES,
    MAX_CHARGE,
    RESULT,
    RUN_END,
    RUN_START,
    SPECTRUM,
    VERSION,
    Invalid,
    RunEnd,
    RunStart,
    SpectrumMessage,
    decode,
    decode_result,
    encode_result,
    encode_run_end,
    encode_run_start,
    encode_spectrum,
)
from rtsearch.types import Spectrum
from tests.wire_cases import _header, _with_header

SENT_NS = 1_700_000_000_123_456_789


def _assert_same_spectrum(got: Spectrum, want: Spectrum) -> None:
    assert got.run == want.run
    assert got.scan == want.scan
    assert got.ms_level == want.ms_level
    assert got.mz.dtype == np.float64 and got.intensity.dtype == np.float32
    # bit-exact peaks
    assert got.mz.tobytes() == np.asarray(want.mz, dtype=np.float64).tobytes()
    assert got.intensity.tobytes() == np.asarray(want.intensity, dtype=np.float32).tobytes()
    assert got.precursor_mz == want.precursor_mz
    assert got.rt == want.rt
    assert got.charges == want.charges
    assert got.precursor_intensity == want.precursor_intensity


# ---------------------------------------------------------------- round trips


def test_spectrum_round_trip_real(ms2) -> None:
    for i, s in enumerate(ms2):
        frames = encode_spectrum(s, sent_ns=SENT_NS + i, budget_ms=25.5)
        assert len(frames) == 4 and frames[0] == SPECTRUM
        assert len(frames[2]) == 8 * s.n_peaks and len(frames[3]) == 4 * s.n_peaks
        msg = decode(frames)
        assert isinstance(msg, SpectrumMessage), msg
        _assert_same_spectrum(msg.spectrum, s)
        assert msg.sent_ns == SENT_NS + i
        assert msg.budget_ms == 25.5


def test_spectrum_round_trip_header_values(sp) -> None:
    h = _header(encode_spectrum(sp, sent_ns=7))
    assert h["v"] == VERSION == 1
    assert (h["run"], h["scan"], h["ms_level"]) == ("Ecoli_MS2_small", 11461, 2)
    assert h["charge"] == 2 and "charges" not in h
    assert h["n"] == sp.n_peaks and h["sent_ns"] == 7
    assert "budget_ms" not in h and "precursor_intensity" not in h
    msg = decode(encode_spectrum(sp, sent_ns=7))
    assert isinstance(msg, SpectrumMessage)
    assert msg.budget_ms is None
    assert msg.spectrum.precursor_mz == 617.318542480469
    assert msg.spectrum.rt == 5000.0916


def test_spectrum_round_trip_multi_charge_and_precursor_intensity(sp) -> None:
    s = dataclasses.replace(sp, charges=(2, 3, 4), precursor_intensity=123456.75)
    frames = encode_spectrum(s, sent_ns=0)
    h = _header(frames)
    assert h["charge"] == 0 and h["charges"] == [2, 3, 4]
    assert h["precursor_intensity"] == 123456.75
    msg = decode(frames)
    assert isinstance(msg, SpectrumMessage), msg
    _assert_same_spectrum(msg.spectrum, s)
    assert msg.spectrum.charges == (2, 3, 4)
    assert msg.sent_ns == 0


def test_spectrum_round_trip_no_charge_and_empty_peaks(sp) -> None:
    s = dataclasses.replace(sp, charges=(), mz=np.zeros(0), intensity=np.zeros(0, dtype=np.float32))
    msg = decode(encode_spectrum(s, sent_ns=1))
    assert isinstance(msg, SpectrumMessage), msg
    assert msg.spectrum.charges == ()
    assert msg.spectrum.n_peaks == 0


def test_spectrum_round_trip_ms1(sp) -> None:
    s = dataclasses.replace(sp, ms_level=1, precursor_mz=0.0, charges=())
    msg = decode(encode_spectrum(s, sent_ns=1))
    assert isinstance(msg, SpectrumMessage), msg
    _assert_same_spectrum(msg.spectrum, s)


def test_spectrum_extra_fields_are_accepted(sp) -> None:
    frames = encode_spectrum(sp, sent_ns=1, activation="HCD", isolation_width=1.6)
    h = _header(frames)
    assert h["activation"] == "HCD" and h["isolation_width"] == 1.6
    msg = decode(frames)
    assert isinstance(msg, SpectrumMessage)
    _assert_same_spectrum(msg.spectrum, sp)


def test_run_start_round_trip() -> None:
    frames = encode_run_start("run-7", instrument="Exploris 480", method={"top": 20})
    assert frames[0] == RUN_START
    msg = decode(frames)
    assert msg == RunStart("run-7", {"instrument": "Exploris 480", "method": {"top": 20}})
    assert decode(encode_run_start("r")) == RunStart("r", {})


def test_run_end_round_trip() -> None:
    frames = encode_run_end("run-7", 1234)
    assert frames[0] == RUN_END
    assert decode(frames) == RunEnd("run-7", 1234)
    # n_spectra is optional on the wire
    assert decode([RUN_END, json.dumps({"v": 1, "run": "r"}).encode()]) == RunEnd("r", None)


def test_result_round_trip_nan_to_null() -> None:
    result = {
        "run": "r", "scan": 5, "status": "identified", "peptide": "PEPTIDEK", "charge": 2,
        "score": 3.25, "q": float("nan"), "ppm": float("inf"), "proteins": ["P1", "P2"], "decoy": False,
    }  # fmt: skip
    frames = encode_result(result)
    assert frames[0] == RESULT and len(frames) == 2
    assert b"NaN" not in frames[1] and b"Infinity" not in frames[1]
    body = decode_result(frames)
    assert body == {**result, "v": VERSION, "q": None, "ppm": None}


def test_decode_result_rejects_other_messages(sp) -> None:
    with pytest.raises(ValueError):
        decode_result(encode_spectrum(sp, sent_ns=1))
    with pytest.raises(ValueError):
        decode_result([RESULT, json.dumps({"v": 2, "scan": 1}).encode()])
    with pytest.raises(ValueError):
        decode_result([RESULT, b"[1, 2]"])


# ---------------------------------------------------------------- invalid messages


def _invalid(frames: list[bytes]) -> Invalid:
    msg = decode(frames)
    assert isinstance(msg, Invalid), msg
    assert msg.code in INVALID_CODES
    assert msg.reason
    return msg


@pytest.mark.parametrize("v", [2, 0, "1", None, ...])
def test_invalid_version(sp, v) -> None:
    bad = _invalid(_with_header(encode_spectrum(sp, sent_ns=5), v=v))
    assert bad.code == "version"
    assert (bad.run, bad.scan, bad.ms_level, bad.sent_ns) == ("Ecoli_MS2_small", 11461, 2, 5)
    assert bad.answerable


def test_invalid_version_control_messages() -> None:
    frames = [RUN_START, json.dumps({"v": 3, "run": "r"}).encode()]
    bad = _invalid(frames)
    assert bad.code == "version" and bad.run == "r" and bad.scan is None
    assert not bad.answerable


@pytest.mark.parametrize("key", ["rt", "n", "sent_ns", "ms_level", "precursor_mz"])
def test_invalid_missing_field_keeps_run_and_scan(sp, key) -> None:
    bad = _invalid(_with_header(encode_spectrum(sp, sent_ns=5), **{key: ...}))
    assert bad.code == "field"
    assert key in bad.reason
    assert (bad.run, bad.scan) == ("Ecoli_MS2_small", 11461)
    assert bad.answerable


def test_invalid_missing_scan_or_run(sp) -> None:
    bad = _invalid(_with_header(encode_spectrum(sp, sent_ns=5), scan=...))
    assert bad.code == "field" and bad.run == "Ecoli_MS2_small" and bad.scan is None
    assert not bad.answerable
    bad = _invalid(_with_header(encode_spectrum(sp, sent_ns=5), run=""))
    assert bad.code == "field" and bad.run is None and bad.scan == 11461
    assert not bad.answerable
    bad = _invalid([RUN_END, json.dumps({"v": 1, "n_spectra": 3}).encode()])
    assert bad.code == "field" and bad.run is None


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"scan": "11461"}, "scan"),
        ({"scan": True}, "scan"),
        ({"rt": "5000"}, "rt"),
        ({"n": -1}, "n"),
        ({"sent_ns": -1}, "sent_ns"),
        ({"ms_level": 0}, "ms_level"),
        ({"precursor_mz": 0}, "precursor_mz"),
        ({"precursor_mz": -617.3}, "precursor_mz"),
        ({"budget_ms": 0}, "budget_ms"),
        ({"budget_ms": "20"}, "budget_ms"),
    ],
)
def test_invalid_field_values(sp, changes, key) -> None:
    bad = _invalid(_with_header(encode_spectrum(sp, sent_ns=5), **changes))
    assert bad.code == "field"
    assert key in bad.reason
    assert bad.run == "Ecoli_MS2_small"


def test_invalid_run_end_n_spectra() -> None:
    bad = _invalid([RUN_END, json.dumps({"v": 1, "run": "r", "n_spectra": -2}).encode()])
    assert bad.code == "field" and bad.run == "r"


@pytest.mark.parametrize("header", [b"{not json", b"\xff\xfe{}", b"[1, 2, 3]", b'"run"', b""])
def test_invalid_header(header) -> None:
    bad = _invalid([SPECTRUM, header, b"", b""])
    assert bad.code == "header"
    assert (bad.run, bad.scan, bad.ms_level, bad.sent_ns) == (None, None, None, None)
    assert not bad.answerable


def test_invalid_frame_count(sp) -> None:
    frames = encode_spectrum(sp, sent_ns=5)
    for cut in (frames[:3], [*frames, b"extra"]):
        bad = _invalid(cut)
        assert bad.code == "frames"
        assert (bad.run, bad.scan) == ("Ecoli_MS2_small", 11461)
        assert bad.answerable
    for short in ([], [SPECTRUM]):
        bad = _invalid(short)
        assert bad.code == "frames"
        assert (bad.run, bad.scan) == (None, None)


def test_invalid_byte_length(sp) -> None:
    frames = encode_spectrum(sp, sent_ns=5)
    n = sp.n_peaks
    cases = [
        [*frames[:2], frames[2][:-8], frames[3]],  # one m/z short
        [*frames[:2], frames[2], frames[3][:-4]],  # one intensity short
        [*frames[:2], frames[2][:-1], frames[3]],  # not a whole float64
        _with_header(frames, n=n + 1),
        _with_header(frames, n=n - 1),
        [*frames[:2], frames[3], frames[2]],  # swapped frames
    ]
    for c in cases:
        bad = _invalid(c)
        assert bad.code == "peaks"
        assert (bad.run, bad.scan) == ("Ecoli_MS2_small", 11461)


def _with_peaks(sp: Spectrum, mz: np.ndarray, inten: np.ndarray) -> list[bytes]:
    frames = encode_spectrum(sp, sent_ns=5)
    return _with_header([*frames[:2], mz.astype("<f8").tobytes(), inten.astype("<f4").tobytes()], n=mz.shape[0])


def test_invalid_unsorted_mz(sp) -> None:
    mz = sp.mz.copy()
    mz[[10, 11]] = mz[[11, 10]]
    bad = _invalid(_with_peaks(sp, mz, sp.intensity))
    assert bad.code == "peaks" and "ascending" in bad.reason
    assert (bad.run, bad.scan) == ("Ecoli_MS2_small", 11461)
    # equal neighbours are allowed (ascending, not strictly)
    mz = sp.mz.copy()
    mz[11] = mz[10]
    assert isinstance(decode(_with_peaks(sp, mz, sp.intensity)), SpectrumMessage)


@pytest.mark.parametrize(("where", "value"), [("mz", np.nan), ("mz", np.inf), ("in", np.nan), ("in", -np.inf)])
def test_invalid_nan_peaks(sp, where, value) -> None:
    mz, inten = sp.mz.copy(), sp.intensity.copy()
    (mz if where == "mz" else inten)[-1] = value
    bad = _invalid(_with_peaks(sp, mz, inten))
    assert bad.code == "peaks"
    assert (bad.run, bad.scan) == ("Ecoli_MS2_small", 11461)


def test_invalid_negative_intensity(sp) -> None:
    inten = sp.intensity.copy()
    inten[3] = -1.0
    bad = _invalid(_with_peaks(sp, sp.mz, inten))
    assert bad.code == "peaks" and "negative" in bad.reason
    # zero intensity is fine
    inten[3] = 0.0
    assert isinstance(decode(_with_peaks(sp, sp.mz, inten)), SpectrumMessage)


@pytest.mark.parametrize(
    "topic",
    [b"spectra", b"", b"result", b"SPECTRUM", b"\x00\xff" * 500],
    ids=["spectra", "empty", "result", "upper", "long"],
)
def test_invalid_topic(sp, topic) -> None:
    bad = _invalid([topic, *encode_spectrum(sp, sent_ns=5)[1:]])
    assert bad.code == "topic"
    assert (bad.run, bad.scan, bad.ms_level, bad.sent_ns) == ("Ecoli_MS2_small", 11461, 2, 5)
    assert bad.reason.startswith("unknown topic") and len(bad.reason) < 200  # the topic is cut to 40 bytes


@pytest.mark.parametrize(
    "changes",
    [
        {"charge": MAX_CHARGE + 1},
        {"charge": -1},
        {"charge": 2.0},
        {"charges": [2, MAX_CHARGE + 1]},
        {"charges": [0, 2]},
        {"charges": [2, True]},
        {"charges": "2,3"},
    ],
)
def test_invalid_charge(sp, changes) -> None:
    bad = _invalid(_with_header(encode_spectrum(sp, sent_ns=5), **changes))
    assert bad.code == "field" and "charge" in bad.reason
    assert (bad.run, bad.scan) == ("Ecoli_MS2_small", 11461)
    assert bad.answerable


def test_charge_limits_accepted(sp) -> None:
    cases: list[tuple[dict[str, Any], tuple[int, ...]]] = [
        ({"charge": MAX_CHARGE}, (MAX_CHARGE,)),
        ({"charge": 0}, ()),
        ({"charges": []}, ()),
        ({"charges": [1, MAX_CHARGE]}, (1, MAX_CHARGE)),
    ]
    for changes, want in cases:
        msg = decode(_with_header(encode_spectrum(sp, sent_ns=5), **changes))
        assert isinstance(msg, SpectrumMessage), msg
        assert msg.spectrum.charges == want


def test_invalid_ms1_is_not_answerable(sp) -> None:
    s = dataclasses.replace(sp, ms_level=1, precursor_mz=0.0, charges=())
    inten = s.intensity.copy()
    inten[0] = -5.0
    frames = encode_spectrum(s, sent_ns=9)
    bad = _invalid([*frames[:3], inten.astype("<f4").tobytes()])
    assert bad.code == "peaks"
    assert (bad.run, bad.scan, bad.ms_level, bad.sent_ns) == ("Ecoli_MS2_small", 11461, 1, 9)
    assert not bad.answerable
    # the same fault at MS2 is answerable
    bad2 = _invalid([*encode_spectrum(sp, sent_ns=9)[:3], inten.astype("<f4").tobytes()])
    assert bad2.ms_level == 2 and bad2.answerable


def test_huge_integer_in_number_field(sp) -> None:
    # a JSON integer too large for a float must give an Invalid, not an OverflowError
    for key in ("rt", "precursor_mz", "budget_ms", "precursor_intensity"):
        bad = _invalid(_with_header(encode_spectrum(sp, sent_ns=5), **{key: 10**400}))
        assert bad.code == "field" and key in bad.reason
        assert (bad.run, bad.scan) == ("Ecoli_MS2_small", 11461)


def test_a_spectrum_carries_its_native_id_and_a_bad_one_is_refused() -> None:
    import numpy as np

    from rtsearch.protocol.wire import Invalid, SpectrumMessage, decode, encode_spectrum
    from rtsearch.types import Spectrum

    sp = Spectrum("r", 7, 2, np.array([100.0, 200.0]), np.array([1.0, 2.0], np.float32), 500.0, (2,), 12.0,
                  native_id="controllerType=0 controllerNumber=1 scan=7")  # fmt: skip
    msg = decode(encode_spectrum(sp))
    assert isinstance(msg, SpectrumMessage) and msg.spectrum.native_id == sp.native_id
    raw = decode(encode_spectrum(sp), peaks="raw")
    assert raw.native_id == sp.native_id  # type: ignore[union-attr]
    assert decode(encode_spectrum(dataclasses.replace(sp, native_id=""))).spectrum.native_id == ""  # type: ignore
    assert b'"id"' not in encode_spectrum(dataclasses.replace(sp, native_id="scan=7"))[1]  # the default goes unsent
    for bad, why in ((7, "must be a string"), ("x" * 513, "longer than 512")):
        out = decode(encode_spectrum(sp, id=bad))
        assert isinstance(out, Invalid) and out.code == "field" and why in out.reason and out.scan == 7
