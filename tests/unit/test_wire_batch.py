"""The batched topics (`rtsearch.protocol.batch`): a ``spectra`` message must reach the daemon as the very chunk the
same spectra sent one message each would make, refuse exactly its bad rows, and ``batch.results`` must carry the
answers a ``result`` message would."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
import zmq

from rtsearch.io.spectra import read_spectra
from rtsearch.matches import Results
from rtsearch.protocol.batch import (
    BATCH_RESULTS,
    SPECTRA,
    SpectraBlock,
    batch_results_count,
    decode_batch_results,
    decode_spectra,
    encode_spectra,
)  # fmt: skip
from rtsearch.protocol.peaks import PEAK_REASONS
from rtsearch.protocol.wire import Invalid, encode_spectrum
from rtsearch.serve.intake.chunks import INT_COLUMNS, Received, SpectraChunk
from rtsearch.serve.intake.reader import Reader
from rtsearch.serve.outputs.publisher_process import send_results
from rtsearch.types import Spectrum
from tests.unit.test_chunks import _read_all, pipe  # noqa: F401  (pipe is a fixture)

_SAME = [c for c in INT_COLUMNS if c not in ("wall_ns", "mono_ns", "batched")]


@pytest.fixture(scope="module")
def yeast(data):
    spectra = list(read_spectra(data / "yeast-small" / "SmallCalibratible_Yeast.mzML", ms_levels=(1, 2)))
    assert {s.ms_level for s in spectra} == {1, 2} and all(len(s.charges) <= 1 for s in spectra)
    return spectra


def _block_items(pull: zmq.Socket, push: zmq.Socket, frames: list[bytes]) -> list[SpectraChunk | Received]:
    push.send_multipart(frames)
    assert pull.poll(2000)
    return Reader(pull).read()


def test_a_spectra_message_makes_the_chunk_of_the_same_spectra_sent_one_by_one(pipe, yeast) -> None:  # noqa: F811
    """A real run with MS1 and MS2 (yeast, Orbitrap Velos), once as 1 message each, once as one ``spectra``
    message: the same rows, fields, peaks (none for MS1), budgets; only the batched one asks for batched answers."""
    push, pull = pipe
    one_by_one = _read_all(push, pull, [encode_spectrum(s, sent_ns=77, budget_ms=25.0) for s in yeast])
    (each,) = [SpectraChunk.concat([c for c in one_by_one if isinstance(c, SpectraChunk)])]
    assert not [c for c in one_by_one if isinstance(c, Received)]
    (block,) = _block_items(pull, push, encode_spectra("SmallCalibratible_Yeast", yeast, sent_ns=77, budget_ms=25.0,
                                                       answer="batch"))  # fmt: skip
    assert isinstance(block, SpectraChunk) and len(block) == len(each) == len(yeast)
    for name in _SAME:
        k = INT_COLUMNS.index(name)
        assert np.array_equal(block.ints[:, k], each.ints[:, k]), name
    assert (block.ints[:, INT_COLUMNS.index("batched")] == 1).all()
    assert (each.ints[:, INT_COLUMNS.index("batched")] == 0).all()
    for k in (0, 1, 3):  # rt, precursor m/z, budget (precursor intensity is not a column of the batched form)
        assert np.array_equal(block.floats[:, k], each.floats[:, k])
    assert block.charges == each.charges and block.runs == each.runs
    assert block.ids == each.ids == [s.native_id for s in yeast] and block.ids[0]  # the mzML's own ids
    assert np.array_equal(block.offsets, each.offsets)
    assert np.array_equal(block.mz, each.mz) and np.array_equal(block.intensity, each.intensity)
    n_ms2_peaks = sum(len(s.mz) for s in yeast if s.ms_level == 2)
    assert len(block.mz) == n_ms2_peaks > 0  # MS1 spectra are counted, their peaks dropped


def test_bad_rows_are_answered_invalid_and_the_rest_go_through(pipe, yeast) -> None:  # noqa: F811
    push, pull = pipe
    ms2 = [s for s in yeast if s.ms_level == 2][:6]
    frames = encode_spectra("r", ms2, sent_ns=5, answer="batch")
    level = bytearray(frames[3])
    level[0] = 0  # ms_level 0
    rt = np.frombuffer(frames[4], "<f8").copy()
    rt[1] = math.nan
    prec = np.frombuffer(frames[5], "<f8").copy()
    prec[2] = -1.0
    charge = bytearray(frames[6])
    charge[3] = 11
    mz = np.frombuffer(frames[8], "<f8").copy()
    n = np.frombuffer(frames[7], "<u4")
    start = int(n[:4].sum())
    mz[start], mz[start + 1] = mz[start + 1] + 1.0, mz[start]  # row 4's m/z not ascending
    frames = [*frames[:3], bytes(level), rt.tobytes(), prec.tobytes(), bytes(charge), frames[7], mz.tobytes(),
              frames[9]]  # fmt: skip
    items = _block_items(pull, push, frames)
    chunk, *refused = items
    assert isinstance(chunk, SpectraChunk) and chunk.ints[:, INT_COLUMNS.index("scan")].tolist() == [ms2[5].scan]
    got = [(r.message.scan, r.message.code, r.message.reason, r.batched) for r in refused]
    assert got == [
        (ms2[0].scan, "field", "column 'ms_level' must be 1..255", True),
        (ms2[1].scan, "field", "column 'rt' must be a finite number within ±10,000,000", True),
        (ms2[2].scan, "field", "column 'precursor_mz' must be a positive number of at most 1,000,000 (MS2)", True),
        (ms2[3].scan, "field", "column 'charge' must be 0..10", True),
        (ms2[4].scan, "peaks", PEAK_REASONS[0], True),
    ]
    assert all(isinstance(r.message, Invalid) and r.message.answerable for r in refused)


def test_a_broken_message_is_counted_or_every_row_refused() -> None:
    frames = encode_spectra("r", [], sent_ns=1)
    assert isinstance(decode_spectra(frames), SpectraBlock) and len(decode_spectra(frames)) == 0
    head = json.loads(frames[1])

    def with_header(**kw) -> list[bytes]:
        return [SPECTRA, json.dumps({**head, **kw}).encode(), *frames[2:]]

    cases = {
        "frames": frames[:-1],
        "version": with_header(v=2),
        "field": with_header(count=3),  # columns hold 0 rows
    }
    for code, msg in cases.items():
        got = decode_spectra(msg)
        assert isinstance(got, Invalid) and got.run == "r" and got.scan is None and not got.answerable, code
    assert decode_spectra(with_header(count=3)).code == "frames"
    assert decode_spectra(with_header(answer="later")).reason.startswith("header field 'answer'")
    assert decode_spectra(with_header(count=2_000_000)).code == "field"
    assert decode_spectra([SPECTRA, b"{"]).code == "header"
    for ids in (["a"], "a", [1]):  # one id for no row; not a list; not strings
        assert decode_spectra(with_header(ids=ids)).reason == "header field 'ids' must be a list of 'count' strings"
    # a spectrum message on this topic names its scan: answered invalid, as v1 answers any malformed message
    wrong = decode_spectra([SPECTRA, *encode_spectrum(_spectrum(9), sent_ns=3)[1:]])
    assert isinstance(wrong, Invalid) and wrong.answerable and (wrong.run, wrong.scan, wrong.code) == ("r", 9, "field")
    # readable columns, short peak frames: every row refused by name, nothing else read
    two = encode_spectra("r", [_spectrum(7), _spectrum(8)], sent_ns=1)
    block = decode_spectra([*two[:-1], two[-1][:-4]])
    assert isinstance(block, SpectraBlock) and [r for r, _, _ in block.problems] == [0, 1]
    assert all(code == "peaks" and "peak frames hold" in why for _, code, why in block.problems)
    assert block.offsets.tolist() == [0, 0, 0]
    # each row's native id is checked as a spectrum message's id
    head2 = json.loads(two[1])
    bad_id = decode_spectra([SPECTRA, json.dumps({**head2, "ids": ["x" * 513, ""]}).encode(), *two[2:]])
    assert isinstance(bad_id, Invalid) and "'ids' is longer than 512" in bad_id.reason
    defaults = [dataclasses.replace(_spectrum(k), native_id=f"scan={k}") for k in (7, 8)]
    assert "ids" not in json.loads(encode_spectra("r", defaults, sent_ns=1)[1])  # scan=N, every receiver's default


def _spectrum(scan: int) -> Spectrum:
    return Spectrum("r", scan, 2, np.array([100.0, 200.0]), np.array([1.0, 2.0], np.float32), 500.0, (2,), 1.0)


def test_answers_asked_for_in_batches_go_in_one_message_the_rest_one_each() -> None:
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    pull.bind("inproc://answers")
    push.connect("inproc://answers")
    try:
        results = Results.unscored("r", [1, 2, 3], [500.0, 600.0, 700.0], ["x", "y", "z"], "shed")
        send_results(push, results, np.array([10, -1, 30]), np.array([11, 21, 31]), np.array([True, False, True]))
        first, second = pull.recv_multipart(), pull.recv_multipart()
    finally:
        push.close(0)
        pull.close(0)
        ctx.term()
    assert first[0] == b"result" and json.loads(first[1])["scan"] == 2 and json.loads(first[1])["sent_ns"] is None
    together = decode_batch_results(second)
    assert second[0] == BATCH_RESULTS and batch_results_count(second) == 2 and batch_results_count(first) == 0
    assert [(r["scan"], r["reason"], r["sent_ns"], r["received_ns"]) for r in together] == [(1, "x", 10, 11),
                                                                                          (3, "z", 30, 31)]
    assert together[0]["published_ns"] == together[1]["published_ns"] >= 31
    assert all(r["v"] == 1 and r["status"] == "shed" and r["run"] == "r" for r in together)
    with pytest.raises(ValueError):
        decode_batch_results(first)
    with pytest.raises(ValueError, match="header says 3"):
        decode_batch_results([second[0], second[1].replace(b'"count":2', b'"count":3'), second[2]])


def test_the_documented_frames_are_the_codecs() -> None:
    from rtsearch.protocol.batch import COLUMNS, N_FRAMES
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "protocol.md").read_text()
    section = text[text.index("**`spectra` message**") : text.index("**`batch.results` message**")]
    rows = re.findall(r"^\| (\d+) \| `(\w+)`", section, flags=re.M)
    assert [(int(k), name) for k, name in rows] == [(2 + i, name) for i, (name, _) in enumerate(COLUMNS)]
    assert f"{N_FRAMES} frames" in section
