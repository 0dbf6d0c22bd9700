"""Hostile field values (issue 15): each is refused at decode with its reason, and whatever names a
spectrum is answerable all the way down (int64 columns, pickling, JSON of the answer).

Before the fix, scans or ``sent_ns`` of 2**63 and more overflowed the intake's int64 columns, lone
surrogates in run names failed JSON encoding, a budget of 1e300 overflowed the daemon's nanoseconds,
``ms_level: 0`` and string or float scans went unanswered.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from typing import Any

import orjson
import pytest
import zmq

from rtsearch.io.spectra import read_spectra
from rtsearch.matches import unscored_batch
from rtsearch.protocol.wire import (
    MAX_BUDGET_MS,
    MAX_RUN_BYTES,
    Invalid,
    RawSpectrum,
    decode,
    encode_spectrum,
    result_body,
)
from rtsearch.serve.intake.chunks import Received, SpectraChunk
from rtsearch.serve.intake.reader import Reader
from rtsearch.types import Spectrum
from tests.wire_cases import _with_header


@pytest.fixture(scope="module")
def sp(data) -> Spectrum:
    """The first MS2 spectrum of the real E. coli file."""
    return next(read_spectra(data / "ecoli-small" / "Ecoli_MS2_small.mzML"))


def _frames(spectrum: Spectrum, **changes: Any) -> list[bytes]:
    small = dataclasses.replace(spectrum, mz=spectrum.mz[:5], intensity=spectrum.intensity[:5])
    return _with_header(encode_spectrum(small, sent_ns=7, budget_ms=30.0), **changes)


def _raw_header(frames: list[bytes], text: str) -> list[bytes]:
    """``frames`` with a header given as JSON text (what json.dumps would escape differently)."""
    return [frames[0], text.encode(), *frames[2:]]


def _answer(msg: Invalid) -> bytes:
    """What the daemon does with an answerable invalid message: its row in the run's table, its JSON."""
    assert msg.run is not None and msg.scan is not None
    unscored_batch(msg.run, [msg.scan], [float("nan")], [msg.reason], n_features=3)
    pickle.loads(pickle.dumps(msg))
    return result_body({"run": msg.run, "scan": msg.scan, "status": "invalid", "reason": msg.reason,
                        "sent_ns": msg.sent_ns})  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"scan": 2**63}, "scan"),
        ({"scan": -(2**63) - 1}, "scan"),
        ({"sent_ns": 2**63}, "sent_ns"),
        ({"sent_ns": 2**64 + 5}, "sent_ns"),
        ({"n": 2**63}, "n"),
        ({"budget_ms": 1e300}, "budget_ms"),
        ({"budget_ms": MAX_BUDGET_MS * 1.0001}, "budget_ms"),
        ({"ms_level": 2**40}, "ms_level"),
    ],
)
def test_numbers_beyond_their_range_are_refused_and_answered(sp, changes, field) -> None:
    msg = decode(_frames(sp, **changes))
    assert isinstance(msg, Invalid) and msg.code == "field" and field in msg.reason, msg
    if field != "scan":
        assert msg.answerable and msg.scan == 11461 and json.loads(_answer(msg))["scan"] == 11461
    else:
        assert not msg.answerable  # no scan to answer with: counted in rtsearch_invalid_total
    assert msg.sent_ns is None or 0 <= msg.sent_ns < 2**63


def test_budget_up_to_the_maximum_is_accepted(sp) -> None:
    assert not isinstance(decode(_frames(sp, budget_ms=MAX_BUDGET_MS)), Invalid)


@pytest.mark.parametrize("run", ['"x\\ud800y"', '"\\udfff"', json.dumps("r" * (MAX_RUN_BYTES + 1)),
                                 json.dumps("é" * (MAX_RUN_BYTES // 2 + 1))])  # fmt: skip
def test_run_names_that_cannot_name_a_file_or_a_topic_are_refused(sp, run) -> None:
    frames = _frames(sp)
    header = frames[1].decode().replace('"Ecoli_MS2_small"', run)
    assert header != frames[1].decode()
    msg = decode(_raw_header(frames, header))
    assert isinstance(msg, Invalid) and "run" in msg.reason and not msg.answerable
    assert msg.run is None


def test_the_longest_run_name_passes(sp) -> None:
    msg = decode(_frames(sp, run="é" * (MAX_RUN_BYTES // 2)))
    assert not isinstance(msg, Invalid) and len(msg.spectrum.run.encode()) == MAX_RUN_BYTES


@pytest.mark.parametrize(("changes", "scan"), [({"ms_level": 0}, 11461), ({"ms_level": -3}, 11461),
                                               ({"scan": "12"}, 12), ({"scan": 12.0}, 12), ({"scan": " 12 "}, 12)])
def test_malformed_but_named_spectra_are_answered(sp, changes, scan) -> None:
    msg = decode(_frames(sp, **changes))
    assert isinstance(msg, Invalid) and msg.answerable and msg.scan == scan
    assert json.loads(_answer(msg))["scan"] == scan


@pytest.mark.parametrize("scan", ["12a", "1e3", 12.5, "²", True, None])
def test_what_is_no_integer_names_no_scan(sp, scan) -> None:
    msg = decode(_frames(sp, scan=scan))
    assert isinstance(msg, Invalid) and msg.scan is None and not msg.answerable


def test_ms1_stays_unanswered(sp) -> None:
    msg = decode(_frames(sp, ms_level=1, rt="x"))
    assert isinstance(msg, Invalid) and msg.scan == 11461 and not msg.answerable


def test_the_intake_reader_survives_every_class(sp) -> None:
    """Through the intake process's reader (decode, chunk columns, peaks checked per chunk) and the
    bytes it hands the daemon: no exception, every valid spectrum in a chunk, every other one a message."""
    hostile = [
        _frames(sp, scan=2**63), _frames(sp, sent_ns=2**63), _frames(sp, budget_ms=1e300), _frames(sp, ms_level=0),
        _frames(sp, scan="12"), _raw_header(_frames(sp), _frames(sp)[1].decode().replace('"Ecoli_MS2_small"',
                                                                                         '"x\\ud800y"')),
    ]  # fmt: skip
    valid = [_frames(sp, scan=s, sent_ns=2**63 - 1) for s in (1, 2**63 - 1, -(2**63))]
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    try:
        pull.bind("inproc://hostile")
        push.connect("inproc://hostile")
        for frames in [*hostile, *valid]:
            push.send_multipart(frames)
        reader, items = Reader(pull), []
        while sum(len(i) if isinstance(i, SpectraChunk) else 1 for i in items) < len(hostile) + len(valid):
            assert pull.poll(2000)
            items.extend(reader.read())
    finally:
        push.close(0)
        pull.close(0)
        ctx.term()
    messages = [i.message for i in items if isinstance(i, Received)]
    assert len(messages) == len(hostile) and all(isinstance(m, Invalid) for m in messages)
    for m in messages:
        if m.answerable:
            _answer(m)
        pickle.loads(pickle.dumps(m))
    chunks = [i for i in items if isinstance(i, SpectraChunk)]
    rows = [row for c in chunks for row in SpectraChunk.from_parts([memoryview(p) for p in c.parts()]).rows()]
    assert sorted(r[1].scan for r in rows) == [-(2**63), 1, 2**63 - 1]
    assert {r[2] for r in rows} == {2**63 - 1}
    orjson.dumps([r[1].run for r in rows])


def test_raw_decode_gives_the_same_verdicts(sp) -> None:
    for changes in ({"scan": 2**63}, {"budget_ms": 1e300}, {"ms_level": 0}, {"sent_ns": -1}):
        a, b = decode(_frames(sp, **changes)), decode(_frames(sp, **changes), peaks="raw")
        assert isinstance(a, Invalid) and not isinstance(b, RawSpectrum) and a == b


def test_every_hostile_class_gets_its_expected_outcome_from_the_intake_reader(sp) -> None:
    """Each class of the fuzz harness (`tests.hostile`, the CI fuzz and bench/fuzz.py send them through a
    daemon), a few messages each, through the intake process's reader: a class that names a spectrum comes out as
    exactly that spectrum's ``invalid`` under the class's reason, one that does not as a counted invalid of that
    reason; nothing raises. Issue 67's classes (rt 1e308, 10,000 charges, headers over 64 kB, control characters,
    batched rows beyond their ranges) among them."""
    import random

    from tests.hostile import _classes

    small = dataclasses.replace(sp, mz=sp.mz[:40], intensity=sp.intensity[:40])
    rng, scan = random.Random(67), 1_000
    for kind, (_, make) in _classes().items():
        for _ in range(6):  # the classes that draw from the rng draw differently each time
            scan += 1
            h = make(small, "r", scan, rng)
            ctx = zmq.Context()
            push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
            try:
                pull.bind("inproc://classes")
                push.connect("inproc://classes")
                push.send_multipart(h.frames)
                assert pull.poll(2000)
                items = Reader(pull).read()
            finally:
                push.close(0)
                pull.close(0)
                ctx.term()
            assert not [i for i in items if isinstance(i, SpectraChunk) and len(i)], kind  # nothing goes on
            (got,) = [i.message for i in items if isinstance(i, Received)]
            assert isinstance(got, Invalid) and got.code == h.invalid, (kind, got)
            if h.answer is not None:
                assert got.answerable and (got.run, got.scan) == h.answer, (kind, got)
                _answer(got)
            else:
                assert not got.answerable, (kind, got)
