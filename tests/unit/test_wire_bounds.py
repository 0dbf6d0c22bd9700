"""Every bound of the wire (issue 67), on both spectrum topics: a value just inside is accepted, one just outside is
refused with a reason naming the field and its bound, and is answered when the message names its spectrum.

Before issue 67 an ``rt`` of 1e308 was accepted (finite) and broke the run's end, a ``charges`` list of 10,000
stalled the engine, control characters in run names and ids reached the results files, and headers and frames
had no size bound. Real spectra: the ``sp`` fixture (the first MS2 of the E. coli file).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pytest

from rtsearch.protocol.batch import (
    MAX_COUNT,
    MAX_SPECTRA_HEADER_BYTES,
    SPECTRA,
    SpectraBlock,
    decode_spectra,
    encode_spectra,
)  # fmt: skip
from rtsearch.protocol.peaks import PEAK_REASONS, peak_problems
from rtsearch.protocol.wire import (
    MAX_CHARGE,
    MAX_CHARGES,
    MAX_HEADER_BYTES,
    MAX_INTENSITY,
    MAX_MESSAGE_BYTES,
    MAX_MZ,
    MAX_NAMED_HEADER_BYTES,
    MAX_PEAKS,
    MAX_RT,
    MAX_RUN_BYTES,
    SPECTRUM,
    Invalid,
    RawSpectrum,
    RunStart,
    SpectrumMessage,
    decode,
    encode_spectrum,
)
from rtsearch.types import Spectrum
from tests.conftest import ROOT
from tests.wire_cases import _with_header

UP, DOWN = math.inf, -math.inf


def _frames(sp: Spectrum, **changes: Any) -> list[bytes]:
    small = dataclasses.replace(sp, mz=sp.mz[:6].copy(), intensity=sp.intensity[:6].copy(), native_id="")
    return _with_header(encode_spectrum(small, sent_ns=7), **changes)


def _refused(frames: list[bytes], code: str, *words: str) -> Invalid:
    msg = decode(frames)
    assert isinstance(msg, Invalid) and msg.code == code, msg
    assert all(w in msg.reason for w in words), (msg.reason, words)
    # the intake's decode gives the same verdict (peak values it leaves to the chunk's check: the test below)
    raw = decode(frames, peaks="raw")
    assert raw == msg or (code == "peaks" and isinstance(raw, RawSpectrum))
    return msg


def _named(msg: Invalid) -> None:
    assert msg.answerable and (msg.run, msg.scan, msg.sent_ns) == ("Ecoli_MS2_small", 11461, 7)


# ---------------------------------------------------------------- spectrum topic: numbers


@pytest.mark.parametrize(
    ("key", "inside", "outside", "bound"),
    [
        ("rt", MAX_RT, math.nextafter(MAX_RT, UP), "at most 10,000,000"),
        ("rt", -MAX_RT, math.nextafter(-MAX_RT, DOWN), "at least -10,000,000"),
        ("rt", 0.0, 1e308, "at most 10,000,000"),
        ("precursor_mz", MAX_MZ, math.nextafter(MAX_MZ, UP), "at most 1,000,000"),
        ("precursor_mz", 5e-324, 0.0, "positive"),
        ("precursor_mz", 617.3, 1e300, "at most 1,000,000"),
        ("precursor_intensity", MAX_INTENSITY, math.nextafter(MAX_INTENSITY, UP), "at most 3.40282e+38"),
        ("precursor_intensity", 0.0, -5e-324, "at least 0"),
        ("budget_ms", 3_600_000.0, math.nextafter(3_600_000.0, UP), "at most 3,600,000"),
    ],
)
def test_a_number_just_inside_is_taken_and_just_outside_refused(sp, key, inside, outside, bound) -> None:
    ok = decode(_frames(sp, **{key: inside}))
    assert isinstance(ok, SpectrumMessage), ok
    if key in ("rt", "precursor_mz", "precursor_intensity"):
        assert getattr(ok.spectrum, key) == inside
    _named(_refused(_frames(sp, **{key: outside}), "field", f"'{key}'", bound))


def test_integers_and_the_longest_peak_count(sp) -> None:
    # n: the header is taken up to MAX_PEAKS (then its frames disagree), refused beyond
    assert _refused(_frames(sp, n=MAX_PEAKS), "peaks").answerable
    _named(_refused(_frames(sp, n=MAX_PEAKS + 1), "field", "'n'", f"{MAX_PEAKS:,}"))
    assert MAX_PEAKS * 8 == MAX_MESSAGE_BYTES  # a spectrum at its most peaks fills a frame at its largest


# ---------------------------------------------------------------- spectrum topic: charges


TOP_CHARGES = list(range(MAX_CHARGE, MAX_CHARGE - MAX_CHARGES, -1))  # the highest MAX_CHARGES of them


@pytest.mark.parametrize("charges", [list(range(1, MAX_CHARGES + 1)), TOP_CHARGES, [MAX_CHARGE], []])
def test_charges_up_to_their_bound_are_taken(sp, charges) -> None:
    msg = decode(_frames(sp, charges=charges))
    assert isinstance(msg, SpectrumMessage) and msg.spectrum.charges == tuple(charges)


@pytest.mark.parametrize(
    "charges",
    [list(range(1, MAX_CHARGES + 2)), [2, 2], [2, 3, 2], [0, 2], [2, MAX_CHARGE + 1], [2, True], [2.0], "2,3",
     [1 + k % MAX_CHARGE for k in range(10_000)]],
)  # fmt: skip
def test_charges_duplicated_out_of_range_or_too_many_are_refused(sp, charges) -> None:
    msg = _refused(_frames(sp, charges=charges), "field", "'charges'", f"at most {MAX_CHARGES} distinct",
                   f"1..{MAX_CHARGE}")  # fmt: skip
    _named(msg)
    if len(charges) == 10_000:  # issue 67, S3: read only as far as its length
        assert "got 10,000 values" in msg.reason


# ---------------------------------------------------------------- spectrum topic: header size


def _padded(sp: Spectrum, size: int) -> list[bytes]:
    """A spectrum message whose header is exactly ``size`` bytes (an unknown field padded)."""
    frames = _frames(sp, pad="")
    return _frames(sp, pad="x" * (size - len(frames[1])))


def test_a_header_of_the_bound_is_taken_and_one_byte_more_refused_but_answered(sp) -> None:
    at = _padded(sp, MAX_HEADER_BYTES)
    assert len(at[1]) == MAX_HEADER_BYTES and isinstance(decode(at), SpectrumMessage)
    over = _padded(sp, MAX_HEADER_BYTES + 1)
    _named(_refused(over, "header", f"{MAX_HEADER_BYTES + 1:,} bytes", f"more than {MAX_HEADER_BYTES:,}"))


def test_a_header_beyond_the_naming_bound_is_not_read(sp) -> None:
    named = _refused(_padded(sp, MAX_NAMED_HEADER_BYTES), "header")
    _named(named)
    unread = _refused(_padded(sp, MAX_NAMED_HEADER_BYTES + 1), "header", f"more than {MAX_HEADER_BYTES:,}")
    assert (unread.run, unread.scan, unread.answerable) == (None, None, False)  # counted, not answered
    # an oversized control message is refused too, on the same grounds
    big_start = [b"run.start", json.dumps({"v": 1, "run": "r", "meta": "x" * MAX_HEADER_BYTES}).encode()]
    bad = decode(big_start)
    assert isinstance(bad, Invalid) and bad.code == "header" and bad.run == "r" and not bad.answerable
    assert decode([b"run.start", json.dumps({"v": 1, "run": "r", "meta": "x" * 60_000}).encode()]) == RunStart(
        "r", {"meta": "x" * 60_000})


def test_the_largest_legal_header_is_far_below_the_bound(sp) -> None:
    """Every field at its longest, escaped as Python's json (ASCII only: 6 bytes for a 2-byte character)."""
    longest = "é" * (MAX_RUN_BYTES // 2)
    frames = _frames(sp, run=longest, id=longest, scan=-(2**63), sent_ns=2**63 - 1, rt=-MAX_RT + 0.123456789,
                     precursor_mz=MAX_MZ - 1e-9, precursor_intensity=MAX_INTENSITY, budget_ms=3_599_999.123456789,
                     charges=TOP_CHARGES, charge=MAX_CHARGE, ms_level=255)  # fmt: skip
    assert 3_000 < len(frames[1]) < 4_096 < MAX_HEADER_BYTES
    assert isinstance(decode(frames), SpectrumMessage)


# ---------------------------------------------------------------- run names and ids


CONTROLS = ["\x00", "\x01", "\x1b", "\t", "\n", "\r", "\x1f", "\x7f", "\x80", "\x9b", "\x9f"]


@pytest.mark.parametrize("c", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
def test_control_characters_are_refused_in_run_names_and_ids(sp, c) -> None:
    bad_run = _refused(_frames(sp, run=f"run{c}1"), "field", "'run'", "control characters", f"U+{ord(c):04X}")
    assert bad_run.run is None and not bad_run.answerable  # no run to answer in: counted
    _named(_refused(_frames(sp, id=f"scan=1{c}[31m"), "field", "'id'", f"control character U+{ord(c):04X}"))
    start = decode([b"run.start", json.dumps({"v": 1, "run": f"r{c}"}).encode()])
    assert isinstance(start, Invalid) and start.code == "field"


@pytest.mark.parametrize("text", ["a b", "é", "\u00a0nbsp", "\u2028", "日本語", "😀", "a\\b", 'q"uote', "~"])
def test_printable_and_other_unicode_is_taken(sp, text) -> None:
    msg = decode(_frames(sp, run=text, id=text))
    assert isinstance(msg, SpectrumMessage) and msg.spectrum.run == text and msg.spectrum.native_id == text


# ---------------------------------------------------------------- peaks


def _with_peaks(sp: Spectrum, mz: np.ndarray) -> list[bytes]:
    inten = np.ones(len(mz), np.float32)
    return _with_header([SPECTRUM, _frames(sp)[1], mz.astype("<f8").tobytes(), inten.tobytes()], n=len(mz))


@pytest.mark.parametrize(
    ("mz", "reason"),
    [([0.0, 100.0, MAX_MZ], None), ([-5e-324, 100.0], PEAK_REASONS[2]),
     ([100.0, math.nextafter(MAX_MZ, UP)], PEAK_REASONS[2]), ([-1e308, 100.0], PEAK_REASONS[2]),
     ([100.0, 1e300], PEAK_REASONS[2]), ([MAX_MZ * 2], PEAK_REASONS[2]), ([100.0, math.inf], PEAK_REASONS[1]),
     ([-math.inf, 100.0], PEAK_REASONS[1]), ([math.nan], PEAK_REASONS[1])],
)  # fmt: skip
def test_peak_mz_within_its_range_in_a_message_and_in_a_chunk(sp, mz, reason) -> None:
    frames = _with_peaks(sp, np.array(mz))
    if reason is None:
        assert isinstance(decode(frames), SpectrumMessage)
    else:
        _named(_refused(frames, "peaks", reason))
        assert "1,000,000" in PEAK_REASONS[2]
    # the intake's check of many at once gives the same reason, alone and among good spectra
    good = np.array([200.0, 300.0])
    for lead in (0, 1, 2):
        all_mz = np.concatenate([np.tile(good, lead), mz])
        offsets = np.array([0, *[2 * (k + 1) for k in range(lead)], len(all_mz)], np.int64)
        got = peak_problems(all_mz, np.ones(len(all_mz), np.float32), offsets)
        assert got == ([] if reason is None else [(lead, reason)])


# ---------------------------------------------------------------- the batched topic


def _spectra(sp: Spectrum, k: int, **changes: Any) -> list[Spectrum]:
    small = dataclasses.replace(sp, mz=sp.mz[:4].copy(), intensity=sp.intensity[:4].copy(), native_id="")
    return [dataclasses.replace(small, scan=100 + i, **changes) for i in range(k)]


def _rows(block: SpectraBlock | Invalid) -> dict[int, str]:
    assert isinstance(block, SpectraBlock), block
    return {row: why for row, code, why in block.problems if code == "field"}


@pytest.mark.parametrize(
    ("column", "inside", "outside", "bound"),
    [
        ("rt", MAX_RT, math.nextafter(MAX_RT, UP), "'rt' must be a finite number within ±10,000,000"),
        ("rt", -MAX_RT, -1e308, "'rt' must be a finite number within ±10,000,000"),
        ("precursor_mz", MAX_MZ, math.nextafter(MAX_MZ, UP), "'precursor_mz' must be a positive number of at most "
         "1,000,000"),
        ("precursor_mz", 5e-324, 1e300, "'precursor_mz' must be a positive number of at most 1,000,000"),
    ],
)  # fmt: skip
def test_a_batched_row_just_inside_is_taken_and_just_outside_refused(sp, column, inside, outside, bound) -> None:
    rows = _spectra(sp, 3)
    rows[0] = dataclasses.replace(rows[0], **{column: inside})
    rows[2] = dataclasses.replace(rows[2], **{column: outside})
    block = decode_spectra(encode_spectra("r", rows, sent_ns=1))
    assert _rows(block) == {2: f"column {bound} (MS2)" if column == "precursor_mz" else f"column {bound}"}
    assert isinstance(block, SpectraBlock) and getattr(block, column)[0] == inside


def test_a_batched_message_of_the_most_rows_with_the_longest_ids_is_taken() -> None:
    """The documented largest legal header: `MAX_COUNT` rows, each id 512 UTF-8 bytes of 2-byte characters, which
    Python's json escapes to 6 bytes each (3 a UTF-8 byte), separated as json.dumps separates."""
    longest = "é" * (MAX_RUN_BYTES // 2)
    empty = np.zeros(0)
    rows = [Spectrum("r", k, 1, empty, empty.astype(np.float32), rt=1.0, native_id=longest) for k in range(MAX_COUNT)]
    frames = encode_spectra("r", rows, sent_ns=1)
    head = json.loads(frames[1])
    frames[1] = json.dumps(head | {"budget_ms": 3_599_999.123456789, "answer": "batch"}).encode()  # ASCII-escaped
    assert MAX_SPECTRA_HEADER_BYTES - 70_000 < len(frames[1]) <= MAX_SPECTRA_HEADER_BYTES
    block = decode_spectra(frames)
    assert isinstance(block, SpectraBlock) and len(block) == MAX_COUNT and not block.problems
    assert block.ids[-1] == longest


def test_a_batched_message_beyond_its_bounds_is_refused_and_counted(sp) -> None:
    frames = encode_spectra("r", _spectra(sp, 2), sent_ns=1)
    head = json.loads(frames[1])

    def with_header(**kw: Any) -> list[bytes]:
        return [SPECTRA, json.dumps(head | kw).encode(), *frames[2:]]

    cases = [
        (with_header(count=MAX_COUNT + 1), "field", f"at most {MAX_COUNT:,}"),
        (with_header(ids=["a", "b\x1b"]), "field", "'ids' holds the control character U+001B"),
        (with_header(run="r\x00"), "field", "control characters"),
        (with_header(pad="x" * MAX_SPECTRA_HEADER_BYTES), "header", f"more than {MAX_SPECTRA_HEADER_BYTES:,}"),
    ]
    for msg, code, why in cases:
        got = decode_spectra(msg)
        assert isinstance(got, Invalid) and got.code == code and why in got.reason and not got.answerable, got
    assert isinstance(decode_spectra(with_header(count=2)), SpectraBlock)

    class Huge(bytes):  # a frame as ZeroMQ hands it, reporting its size (a real one would take 128 MiB)
        def __len__(self) -> int:
            return MAX_MESSAGE_BYTES + 1

    over = decode_spectra([*frames[:-2], Huge(frames[-2]), frames[-1]])
    assert isinstance(over, Invalid) and over.code == "frames" and f"more than {MAX_MESSAGE_BYTES:,}" in over.reason


def test_the_sender_is_stopped_before_a_bound(sp) -> None:
    one = _spectra(sp, 1)[0]
    with pytest.raises(ValueError, match=f"at most {MAX_COUNT:,}"):
        encode_spectra("r", [one] * (MAX_COUNT + 1), sent_ns=1)
    assert len(encode_spectra("r", [one] * MAX_COUNT, sent_ns=1)) == 10
    many = dataclasses.replace(one, mz=np.broadcast_to(np.float64(100.0), (MAX_PEAKS + 1,)))  # no memory behind it
    with pytest.raises(ValueError, match=f"at most {MAX_PEAKS:,}"):
        encode_spectra("r", [many], sent_ns=1)


def test_the_documented_bounds_are_the_codes() -> None:
    text = (ROOT / "docs" / "protocol.md").read_text()
    for number in (MAX_HEADER_BYTES, MAX_NAMED_HEADER_BYTES, MAX_MESSAGE_BYTES, MAX_PEAKS, MAX_COUNT,
                   MAX_SPECTRA_HEADER_BYTES, int(MAX_RT), int(MAX_MZ), MAX_RUN_BYTES):  # fmt: skip
        assert f"{number:,}" in text, number
    assert f"at most {MAX_CHARGES} distinct int 1–{MAX_CHARGE}" in text and f"{MAX_INTENSITY:g}" in text


def test_the_batched_ids_shortcut_never_passes_an_id_the_check_of_each_refuses() -> None:
    """`decode_spectra` checks a message's ids at once (`_plain`) and one by one only when that fails: seeded lists
    of ids, some with control characters, non-ASCII, too long or not strings; whatever the shortcut passes, the check
    of each passes too."""
    import random

    from rtsearch.protocol.batch import _plain
    from rtsearch.protocol.wire import _Bad, _native_id

    def ok(i: object) -> bool:
        try:
            _native_id(i, "ids")
            return True
        except _Bad:
            return False

    rng = random.Random(67)
    odd = ["\x00", "\x1b", "\x7f", "\x9b", "\t", "é", "\u00a0", "😀", "~", '"']
    seen = {True: 0, False: 0}
    for _ in range(3000):
        ids: list[object] = [
            "".join(rng.choice(odd) if rng.random() < 0.002 else rng.choice("ab =1") for _ in range(n))
            for n in rng.choices([0, 5, 45, MAX_RUN_BYTES, MAX_RUN_BYTES + 1], k=rng.randint(1, 4))
        ]  # fmt: skip
        if rng.random() < 0.05:
            ids.append(rng.choice([5, None, ["x"]]))
        every = all(ok(i) for i in ids)
        assert not _plain(ids) or every, ids
        seen[every] += 1
    assert min(seen.values()) > 300, seen
