"""What the intake process hands the daemon: chunks, their bytes, and peaks checked per chunk.

The intake process reads with `Reader.read` (decode without peak checks, then
`ChunkBuilder` checks a chunk's peaks at once); it must answer every message exactly as
`rtsearch.protocol.wire.decode` does message by message. These tests send real and mutated
messages through a ZeroMQ socket into `Reader.read` and compare.
"""

from __future__ import annotations

import collections
import dataclasses
import math

import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtsearch.io.spectra import read_spectra
from rtsearch.protocol.wire import Invalid, RunEnd, RunStart, SpectrumMessage, decode, encode_spectrum
from rtsearch.serve.children.framing import Unpacker, pack
from rtsearch.serve.intake.chunks import MESSAGE, SPECTRA, Received, SpectraChunk, merged
from rtsearch.serve.intake.reader import Reader
from rtsearch.types import Spectrum
from tests.wire_cases import _base_messages, _mutated_message


@pytest.fixture()
def pipe():
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    push.setsockopt(zmq.SNDHWM, 0)
    pull.setsockopt(zmq.RCVHWM, 0)
    pull.bind("inproc://chunks")
    push.connect("inproc://chunks")
    yield push, pull
    push.close(0)
    pull.close(0)
    ctx.term()


def _read_all(push: zmq.Socket, pull: zmq.Socket, messages: list[list[bytes]]) -> list[SpectraChunk | Received]:
    for frames in messages:
        push.send_multipart(frames)
    reader, items = Reader(pull), []
    # inproc delivers at once; read until every message came back
    while sum(len(i) if isinstance(i, SpectraChunk) else 1 for i in items) < len(messages):
        assert pull.poll(2000), "messages did not arrive"
        items.extend(reader.read())
    return items


def test_real_run_round_trip_through_bytes(pipe, data) -> None:
    """A real run with MS1 and MS2 (yeast, Orbitrap Velos): every field survives reading, packing and
    unpacking in pieces of any size; MS1 spectra are counted but carry no peaks."""
    spectra = list(read_spectra(data / "yeast-small" / "SmallCalibratible_Yeast.mzML", ms_levels=(1, 2)))
    assert {s.ms_level for s in spectra} == {1, 2}
    messages = [encode_spectrum(s, sent_ns=1000 + i, budget_ms=25.0 if i % 2 else None) for i, s in enumerate(spectra)]
    items = _read_all(*pipe, messages)
    assert all(isinstance(i, SpectraChunk) for i in items)
    stream = b"".join(pack(SPECTRA, i.parts()) for i in items if isinstance(i, SpectraChunk))
    rng = np.random.default_rng(3)
    unpacker, got = Unpacker(), []
    at = 0
    while at < len(stream):
        step = int(rng.integers(1, 20_000))
        got.extend(unpacker.feed(stream[at : at + step]))
        at += step
    chunks = [SpectraChunk.from_parts(parts) for kind, parts in got]
    assert [k for k, _ in got] == [SPECTRA] * len(items)
    rows = [row for c in chunks for row in c.rows()]
    assert len(rows) == len(spectra)
    for (_, got_sp, sent, _, _, budget), want, k in zip(rows, spectra, range(len(spectra)), strict=True):
        assert (got_sp.run, got_sp.scan, got_sp.ms_level) == (want.run, want.scan, want.ms_level)
        assert got_sp.precursor_mz == want.precursor_mz and got_sp.rt == want.rt
        assert got_sp.charges == want.charges and got_sp.native_id == want.native_id != ""
        assert sent == 1000 + k
        assert (budget == 25.0) if k % 2 else math.isnan(budget)
        if want.ms_level >= 2:
            np.testing.assert_array_equal(got_sp.mz, want.mz)
            np.testing.assert_array_equal(got_sp.intensity, want.intensity.astype(np.float32))
        else:
            assert got_sp.n_peaks == 0


def test_native_ids_follow_their_rows_through_split_and_concat(pipe, data) -> None:
    spectra = list(read_spectra(data / "ecoli-small" / "Ecoli_MS2_small.mzML"))[:30]
    bare = dataclasses.replace(spectra[0], run="bare", native_id="")
    # the reader may hand the 30 over in more than one chunk (read as they came: CI saw two once)
    with_ids = SpectraChunk.concat(_read_all(*pipe, [encode_spectrum(s) for s in spectra]))
    (without,) = _read_all(*pipe, [encode_spectrum(bare)])
    assert with_ids.ids == [s.native_id for s in spectra] and without.ids == []
    rest, taken = with_ids.split(np.array([3, 7]))
    assert taken.ids == [spectra[3].native_id, spectra[7].native_id]
    assert rest is not None and rest.ids == [s.native_id for k, s in enumerate(spectra) if k not in (3, 7)]
    both = SpectraChunk.concat([without, taken])
    assert both.ids == ["", spectra[3].native_id, spectra[7].native_id]
    assert [sp.native_id for _, sp, *_ in both.rows()] == both.ids


def test_merged_joins_consecutive_chunks_up_to_the_limit_and_keeps_messages_in_place(pipe, data) -> None:
    """Chunks that queued up are taken as one (the daemon's cost is per chunk), never past a message between them
    nor past ``limit`` spectra; every spectrum is there once, in order."""
    spectra = list(read_spectra(data / "ecoli-small" / "Ecoli_MS2_small.mzML"))[:12]
    one = [_read_all(*pipe, [encode_spectrum(s, sent_ns=k)]) for k, s in enumerate(spectra)]
    chunks = [c for (c,) in one]  # a chunk a spectrum
    end = Received(RunEnd(spectra[0].run, 5), 1, 2)
    items = [*chunks[:5], end, *chunks[5:]]
    out = merged(items, 4)
    assert [len(i) if isinstance(i, SpectraChunk) else "end" for i in out] == [4, 1, "end", 4, 3]
    rows = [sp.scan for i in out if isinstance(i, SpectraChunk) for _, sp, *_ in i.rows()]
    assert rows == [s.scan for s in spectra]
    sent = [sent for i in out if isinstance(i, SpectraChunk) for _, _, sent, *_ in i.rows()]
    assert sent == list(range(12))
    assert merged(chunks[:1], 4)[0] is chunks[0] and merged([end], 4) == [end] and merged([], 4) == []


def _outcome(item: SpectrumMessage | Invalid | RunStart | RunEnd) -> tuple[object, ...]:
    if isinstance(item, SpectrumMessage):
        s = item.spectrum
        return ("spectrum", s.run, s.scan, s.ms_level, s.charges, s.mz.tobytes() if s.ms_level >= 2 else b"")
    if isinstance(item, Invalid):
        return ("invalid", item.code, item.reason, item.run, item.scan, item.ms_level, item.sent_ns)
    return (type(item).__name__, item.run)


def _outcomes_read(items: list[SpectraChunk | Received]) -> list[tuple[object, ...]]:
    out = []
    for item in items:
        if isinstance(item, Received):
            out.append(_outcome(item.message))
            continue
        for _, s, sent, _, _, _ in item.rows():
            out.append(_outcome(SpectrumMessage(s, sent)))
    return out


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(draws=st.data())
def test_fuzz_chunks_answer_as_message_by_message(ms2, draws) -> None:  # noqa: F811
    """Mutated messages (damaged headers, NaN, disorder, negatives, cut frames) in a burst: the
    chunk path gives each the outcome `decode` gives it alone, and control messages keep their
    place among the spectra."""
    base = _base_messages(ms2)
    # (a message of no frames cannot cross ZeroMQ)
    messages = draws.draw(st.lists(_mutated_message(base).filter(len), min_size=1, max_size=8))
    want = [_outcome(decode(m)) for m in messages]
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    try:
        pull.bind("inproc://fuzz")
        push.connect("inproc://fuzz")
        got = _outcomes_read(_read_all(push, pull, messages))
    finally:
        push.close(0)
        pull.close(0)
        ctx.term()
    assert collections.Counter(got) == collections.Counter(want)
    control = {"RunStart", "RunEnd"}
    # what came before each control message is the same set of outcomes
    for seq in (got, want):
        assert [o for o in seq if o[0] in control] == [o for o in want if o[0] in control]
    cuts_got = [collections.Counter(got[:i]) for i, o in enumerate(got) if o[0] in control]
    cuts_want = [collections.Counter(want[:i]) for i, o in enumerate(want) if o[0] in control]
    assert cuts_got == cuts_want


def test_peak_problems_reasons_in_one_chunk(pipe, ms2) -> None:  # noqa: F811
    """Each kind of bad peaks in one burst, between good spectra: good ones stay in the chunk (or chunks),
    each bad one is answered with decode's reason, in decode's order of checks."""
    sp: Spectrum = dataclasses.replace(ms2[0], mz=ms2[0].mz[:8].copy(), intensity=ms2[0].intensity[:8].copy())

    def variant(scan: int, mz: np.ndarray | None = None, inten: np.ndarray | None = None) -> list[bytes]:
        return encode_spectrum(dataclasses.replace(sp, scan=scan, mz=sp.mz if mz is None else mz,
                                                   intensity=sp.intensity if inten is None else inten), sent_ns=scan)

    unsorted, nan_end, inf_int, neg = sp.mz[::-1].copy(), sp.mz.copy(), sp.intensity.copy(), sp.intensity.copy()
    nan_end[-1] = np.inf  # still ascending: refused for the infinite end
    inf_int[3] = np.inf
    neg[5] = -1.0
    both = unsorted.copy()  # disorder is checked first, then the ends
    both[0] = np.inf
    messages = [variant(1), variant(2, mz=unsorted), variant(3), variant(4, mz=nan_end), variant(5, inten=inf_int),
                variant(6, inten=neg), variant(7, mz=both), variant(8, mz=sp.mz[:0], inten=sp.intensity[:0])]
    items = _read_all(*pipe, messages)
    want = {scan: decode(m) for scan, m in zip(range(1, 9), messages, strict=True)}
    got = {o[4]: o for o in _outcomes_read(items) if o[0] == "invalid"}
    assert sorted(got) == [2, 4, 5, 6, 7]
    for scan, o in got.items():
        w = want[scan]
        assert isinstance(w, Invalid) and (o[1], o[2]) == (w.code, w.reason)
    # the good ones in a chunk (one when the reader takes the burst at once; on a busy machine a read may end early
    # and the burst's good spectra come in two chunks, in order)
    chunks = [i for i in items if isinstance(i, SpectraChunk)]
    assert chunks and [sp.scan for c in chunks for _, sp, *_ in c.rows()] == [1, 3, 8]
    assert [r.message.reason for r in items if isinstance(r, Received)] == [  # type: ignore[union-attr]
        "m/z values are not ascending (or hold NaN)", "m/z values hold NaN or infinite values",
        "intensities hold NaN or infinite values", "negative intensities", "m/z values are not ascending (or hold NaN)",
    ]  # scans 2, 4, 5, 6, 7  # fmt: skip


def test_unpacker_splits_any_stream() -> None:
    msgs = [(SPECTRA, [b"", b"abc", bytes(range(256)) * 40]), (MESSAGE, [b"x" * 70_000]), (3, [])]
    stream = b"".join(pack(k, p) for k, p in msgs)
    for step in (1, 7, 4096, len(stream)):
        u, out = Unpacker(), []
        for at in range(0, len(stream), step):
            out.extend(u.feed(stream[at : at + step]))
        assert [(k, [bytes(x) for x in p]) for k, p in out] == msgs


def _random_messages(rng: np.random.Generator, n: int) -> list[tuple[int, list[bytes]]]:
    """``n`` messages of a random kind, each of up to 3 random parts of up to 300 kB."""
    sizes = [rng.integers(0, 300_000, size=int(rng.integers(0, 4))).tolist() for _ in range(n)]
    return [(int(rng.integers(1, 7)), [rng.bytes(k) for k in part]) for part in sizes]


def test_unpacker_copies_only_a_message_that_spans_reads() -> None:
    """Seeded random messages up to 300 kB cut at random points, each read a fresh buffer (as the daemon's large reads
    are): every message comes out whole, and one wholly inside a read is a view of that read, not of a copy (the
    daemon's event loop joined each read to the tail before it: ~9 MB copied a 4 MB read, docs/history/RESULTS.md
    2026-11-29)."""
    rng = np.random.default_rng(20261129)
    msgs = _random_messages(rng, 60)
    stream = b"".join(pack(k, p) for k, p in msgs)
    cuts = np.sort(rng.choice(np.arange(1, len(stream)), size=40, replace=False)).tolist()
    u, out, reads = Unpacker(), [], []
    for lo, hi in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        buf = np.frombuffer(stream[lo:hi], np.uint8).copy()  # a buffer of its own, written once
        reads.append((lo, hi, buf))
        out.extend((lo, hi, buf, kind, parts) for kind, parts in u.feed(memoryview(buf)))
    assert [(k, [bytes(x) for x in p]) for *_, k, p in out] == msgs
    ends = np.cumsum([len(pack(k, p)) for k, p in msgs])
    inside = 0
    for (lo, hi, buf, _, parts), end, (kind, p) in zip(out, ends, msgs, strict=True):
        start = end - len(pack(kind, p))
        if lo <= start and end <= hi and any(len(x) for x in parts):
            inside += 1
            assert all(np.shares_memory(np.frombuffer(x, np.uint8), buf) for x in parts if len(x))
    assert inside >= 10


def test_unpacker_reads_a_large_message_in_place() -> None:
    """The daemon's reads as `Intake._read` makes them: while a begun message misses ``least`` bytes or more, the
    reads go into its own buffer (`Unpacker.reserve`, `filled`), otherwise into a fresh buffer that is fed; seeded
    random messages (up to 300 kB) and read sizes come out whole and in order, the large ones as views of their own
    buffer."""
    rng = np.random.default_rng(1129)
    msgs = _random_messages(rng, 80)
    stream = memoryview(b"".join(pack(k, p) for k, p in msgs))
    u, out, at, in_place = Unpacker(), [], 0, 0
    while at < len(stream):
        step = int(rng.integers(1, 120_000))
        into = u.reserve(50_000)
        if into is not None:
            n = min(step, len(into), len(stream) - at)
            into[:n] = stream[at : at + n]
            got = u.filled(n)
            in_place += bool(got)
        else:
            n = min(step, len(stream) - at)
            got = u.feed(memoryview(np.frombuffer(stream[at : at + n], np.uint8).copy()))
        out.extend(got)
        at += n
    assert [(k, [bytes(x) for x in p]) for k, p in out] == msgs
    assert in_place >= 5


def test_the_good_chunk_shortcut_agrees_with_the_reasons() -> None:
    """`peak_problems` answers a chunk with no bad peaks without the reasons' checks: seeded random chunks, some
    with one flaw planted (disorder, an infinite end, NaN, a negative or infinite intensity) and some clean, with
    empty spectra and falls between spectra (allowed), are called good exactly when the reasons find nothing."""
    from rtsearch.protocol.peaks import _all_good, _reasons

    rng = np.random.default_rng(20261126)
    flaws = ("none", "none", "fall", "inf_end", "nan", "neg", "inf_int", "nan_int", "fall_at_edge")
    seen = collections.Counter()
    for _ in range(600):
        sizes = rng.integers(0, 6, size=rng.integers(1, 8))
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        if offsets[-1] == 0:
            continue
        mz = np.concatenate([np.sort(rng.uniform(100, 2000, k)) for k in sizes])
        inten = rng.uniform(0, 1e4, offsets[-1]).astype(np.float32)
        flaw = flaws[rng.integers(len(flaws))]
        row = int(rng.choice(np.flatnonzero(sizes)))
        lo, hi = offsets[row], offsets[row + 1]
        at = int(rng.integers(lo, hi))
        if flaw == "fall" and hi - lo > 1:
            mz[lo], mz[hi - 1] = mz[hi - 1], mz[lo]
        elif flaw == "inf_end":
            mz[hi - 1] = np.inf
        elif flaw == "nan":
            mz[at] = np.nan
        elif flaw == "neg":
            inten[at] = -1.0
        elif flaw in ("inf_int", "nan_int"):
            inten[at] = np.inf if flaw == "inf_int" else np.nan
        elif flaw == "fall_at_edge":  # the next spectrum starts below this one's end: not a flaw
            mz[lo:hi] += 5000.0
        good = not _reasons(mz, inten, offsets)
        assert _all_good(mz, inten, offsets[1:]) == good, (flaw, sizes, mz, inten)
        seen[good] += 1
    assert seen[True] > 100 and seen[False] > 100  # both kinds were met


def test_a_lone_spectrum_chunk_gets_the_reasons_of_a_chunk_of_many() -> None:
    """`peak_problems` checks a one-spectrum chunk (a lone spectrum's) as `decode` checks a message: seeded spectra,
    clean and with each flaw planted (several at once too), get the reason the many-row reasons give them."""
    from rtsearch.protocol.peaks import _reasons, peak_problems

    rng = np.random.default_rng(20261129)
    flaws = ("none", "fall", "inf_end", "ninf_start", "nan", "neg", "inf_int", "ninf_int", "nan_int")
    seen = collections.Counter()
    for _ in range(800):
        n = int(rng.integers(1, 9))
        mz = np.sort(rng.uniform(100, 2000, n))
        inten = rng.uniform(0, 1e4, n).astype(np.float32)
        for flaw in rng.choice(flaws, size=int(rng.integers(1, 3))):
            at = int(rng.integers(n))
            if flaw == "fall" and n > 1:
                mz[0], mz[-1] = mz[-1], mz[0]
            elif flaw in ("inf_end", "ninf_start"):
                mz[-1 if flaw == "inf_end" else 0] = np.inf if flaw == "inf_end" else -np.inf
            elif flaw == "nan":
                mz[at] = np.nan
            elif flaw == "neg":
                inten[at] = -1.0
            elif flaw in ("inf_int", "ninf_int", "nan_int"):
                inten[at] = {"inf_int": np.inf, "ninf_int": -np.inf, "nan_int": np.nan}[flaw]
        offsets = np.array([0, n], np.int64)
        assert peak_problems(mz, inten, offsets) == _reasons(mz, inten, offsets), (mz, inten)
        seen[len(_reasons(mz, inten, offsets))] += 1
    assert seen[0] > 30 and seen[1] > 300  # clean and flawed spectra both met (57 and 743 with this seed)
