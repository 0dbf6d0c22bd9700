"""The cluster's wire (`rtsearch.cluster.frames`): real batches and answers come back bit for bit; anything else a
peer might send — wrong counts and lengths, unknown kinds, huge claims, a pickle where JSON belongs — is refused
with `FrameError` and no other exception (issue 67)."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle

import numpy as np
import orjson
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import TOML, bundled
from rtsearch.cluster import frames as wire
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.matches import BestMatches, ScoredBatch
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.partial import QueryScores
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import named


@pytest.fixture(scope="module")
def real(demo_index, data) -> tuple[SpectraBatch, ScoredBatch, QueryScores]:
    """A batch of the Ecoli run's MS2 spectra, its answer (named, two ranks) and its queries scored in a mass range."""
    cfg = dataclasses.replace(load_config(bundled(TOML)).search, ranks=2)
    target = DatabaseTarget(demo_index, cfg, get_backend("numpy"))
    ms2 = [s for s in read_spectra(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2]
    batch = SpectraBatch.of(ms2[:80])
    batch.native_id = [f"index={k}" for k in range(len(batch))]
    batch.problem[3] = "no peaks"
    scored = named(target, target.score(batch))
    scored.stages["scoring"] = 0.25
    queries = target.score_queries(batch, (1500.0, np.inf))
    assert scored.lower and scored.names is not None and (scored.best.match >= 0).sum() > 10 and len(queries.queries)
    return batch, scored, queries


def _frames(parts: list[wire.Frame]) -> list[bytes]:
    return [bytes(p) for p in parts]  # as they arrive: one bytes object a frame


def _same_arrays(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same_best(a: BestMatches, b: BestMatches) -> None:
    for f in dataclasses.fields(BestMatches):
        _same_arrays(getattr(a, f.name), getattr(b, f.name))


@pytest.mark.parametrize("own", [None, (1400.5, 2500.25), (-np.inf, np.inf)])
def test_a_batch_comes_back_bit_for_bit(real, own) -> None:
    batch, _, _ = real
    got, got_own = wire.read_batch(_frames(wire.batch_frames(batch, own)))
    assert got_own == own
    for name in ("scan", "precursor_mz", "rt", "mz", "intensity", "offsets"):
        _same_arrays(getattr(got, name), getattr(batch, name))
    assert (got.run, got.charges, got.problem, got.native_id) == (batch.run, batch.charges, batch.problem,
                                                                  batch.native_id)  # fmt: skip


def test_a_scored_answer_comes_back_bit_for_bit(real) -> None:
    _, scored, _ = real
    kind, got = wire.read_reply(_frames(wire.reply_frames(("scored", scored))))
    assert kind == "scored" and isinstance(got, ScoredBatch)
    for name in ("scan", "precursor_mz", "rt"):
        _same_arrays(getattr(got, name), getattr(scored, name))
    _same_best(got.best, scored.best)
    assert len(got.lower) == len(scored.lower) == 1
    _same_best(got.lower[0], scored.lower[0])
    assert (got.run, got.reason, got.stages, got.native_id, got.names) == (scored.run, scored.reason, scored.stages,
                                                                           scored.native_id, scored.names)  # fmt: skip


def test_a_partition_workers_queries_come_back_bit_for_bit(real) -> None:
    _, _, queries = real
    kind, got = wire.read_reply(_frames(wire.reply_frames(("queries", queries))))
    assert kind == "queries" and isinstance(got, QueryScores)
    for f in dataclasses.fields(got.queries):
        _same_arrays(getattr(got.queries, f.name), getattr(queries.queries, f.name))
    for name in ("order", "cand", "prelim", "match_probability"):
        _same_arrays(getattr(got, name), getattr(queries, name))
    for f in dataclasses.fields(got.stats):
        _same_arrays(getattr(got.stats, f.name), getattr(queries.stats, f.name))
    assert got.reason == queries.reason


def test_errors_hellos_heartbeats_and_times() -> None:
    error = ("error", "w0: ValueError: no")
    assert wire.read_reply(_frames(wire.reply_frames(error))) == error  # type: ignore[arg-type]
    hello = wire.Hello("w1", 0, os.getpid(), "cupy", 12345, 6_000_000_000, "1")
    assert wire.read_hello(wire.hello(hello)) == hello
    assert wire.read_beat(wire.beat_frames(b"w1.abc", 1_500_000)) == (b"w1.abc", 1_500_000)
    assert wire.read_times(wire.times_frame(3, 2, 1)) == (3, 2, 1)


class Evil:
    def __reduce__(self):  # noqa: ANN204
        return os.system, ("false",)


def _hostile(real) -> list[tuple[str, list[bytes]]]:
    """(reader, frames) pairs no reader may take."""
    batch, scored, queries = real
    good_batch = _frames(wire.batch_frames(batch, (1.0, 2.0)))
    good_scored = _frames(wire.reply_frames(("scored", scored)))
    good_queries = _frames(wire.reply_frames(("queries", queries)))
    peptides = scored.names.peptides

    def head(frames: list[bytes], **change) -> list[bytes]:
        h = json.loads(frames[0])
        h.update(change)
        return [json.dumps(h).encode(), *frames[1:]]  # (orjson writes no integer past 64 bits)

    cases = [
        ("batch", []), ("batch", good_batch[:-1]), ("batch", [*good_batch, b""]),  # frames missing or too many
        ("batch", [good_batch[0], good_batch[1][:-1], *good_batch[2:]]),  # a frame a byte short
        ("batch", [pickle.dumps(Evil()), *good_batch[1:]]), ("batch", [b"{", *good_batch[1:]]),  # not JSON
        ("batch", [b"[1, 2]", *good_batch[1:]]), ("batch", [b"\xff\xfe", *good_batch[1:]]),
        ("batch", head(good_batch, kind="scored")), ("batch", head(good_batch, n=10**30)),  # a kind, a huge claim
        ("batch", head(good_batch, n=wire.MAX_ROWS + 1)), ("batch", head(good_batch, n=-1)),
        ("batch", head(good_batch, n=float(len(batch)))), ("batch", head(good_batch, peaks=2**62)),
        ("batch", head(good_batch, own="yes")), ("batch", head(good_batch, own=False)),
        ("batch", head(good_batch, runs="r")), ("batch", head(good_batch, runs=[1])),
        ("batch", head(good_batch, charges=[[2, 3], ["2"]])), ("batch", head(good_batch, charges=[[10**9]])),
        ("batch", head(good_batch, charges=[list(range(100))])), ("batch", head(good_batch, charges=[2])),
        ("batch", head(good_batch, native_id=["x"])), ("batch", head(good_batch, runs=[])),  # an index past its values
        ("batch", [*good_batch[:7], np.full(len(batch), -1, "<i4").tobytes(), *good_batch[8:]]),
        ("batch", [*good_batch[:9], np.full(len(batch), 10**6, "<i4").tobytes(), *good_batch[10:]]),
        ("batch", [*good_batch[:4], np.arange(len(batch) + 1)[::-1].astype("<i8").tobytes(), *good_batch[5:]]),
        ("batch", [*good_batch[:-1], np.array([2.0, 1.0]).tobytes()]),  # a mass range upside down
        ("batch", [*good_batch[:-1], np.array([np.nan, 1.0]).tobytes()]),
        ("reply", []), ("reply", [orjson.dumps({"kind": "pickle"})]), ("reply", [orjson.dumps({"kind": "error"})]),
        ("reply", [orjson.dumps({"kind": "error", "text": "x"}), b"extra"]), ("reply", [pickle.dumps(("scored", 1))]),
        ("reply", good_scored[:-1]), ("reply", head(good_scored, features=[])),
        ("reply", head(good_scored, features=[2**40])), ("reply", head(good_scored, features="2")),
        ("reply", head(good_scored, n=2**40)), ("reply", head(good_scored, stages={"scoring": "1"})),
        ("reply", head(good_scored, stages=[1])), ("reply", head(good_scored, names={"peptides": []})),
        ("reply", head(good_scored, names=[1])), ("reply", head(good_scored, reasons=None)),
        ("reply", head(good_scored, names={"peptides": peptides, "proteins": [["P1"]] * (len(scored) - 1)})),
        ("reply", head(good_queries, reasons=[3])),
        ("reply", head(good_queries, q=len(queries.queries) + 1)), ("reply", head(good_queries, k=-1)),
        ("reply", [good_queries[0], (np.asarray(queries.queries.spectrum) + 10**6).astype("<i8").tobytes(),
                   *good_queries[2:]]),  # a query of a spectrum the batch has not
        ("reply", [*good_queries[:7], np.full(np.asarray(queries.cand).shape, -7, "<i8").tobytes(), *good_queries[8:]]),
        ("hello", [b"{}"]), ("hello", [pickle.dumps({"name": "w0", "piece": 0, "pid": 1, "backend": "numpy"})]),
        ("hello", [orjson.dumps({"name": "w0", "piece": 0, "pid": 0, "backend": "numpy", "entries": 0,
                                 "device_bytes": 0, "gpu": ""})]),  # fmt: skip
        ("hello", [orjson.dumps({"name": "w0", "piece": "0", "pid": 1, "backend": "numpy", "entries": 0,
                                 "device_bytes": 0, "gpu": ""})]),  # fmt: skip
        ("beat", [b"w0"]), ("beat", [b"w0", b"1234"]), ("beat", [b"w0", b"12345678", b""]),
        ("times", [b"\x00" * 16]), ("times", [b""]),
    ]  # fmt: skip
    return cases


READERS = {"batch": wire.read_batch, "reply": wire.read_reply, "hello": lambda f: wire.read_hello(f[0]),
           "beat": wire.read_beat, "times": lambda f: wire.read_times(f[0])}  # fmt: skip


def test_hostile_frames_are_refused_with_frame_error_only(real) -> None:
    cases = _hostile(real)
    assert len(cases) > 40
    for k, (reader, frames) in enumerate(cases):
        with pytest.raises(wire.FrameError):
            READERS[reader](frames)
            pytest.fail(f"case {k} ({reader}) was taken")


def test_mangled_frames_are_read_or_refused_never_anything_else(real) -> None:
    """Each real message cut, padded, its frames shuffled or its bytes flipped: read, or `FrameError`."""
    batch, scored, queries = real
    rng = np.random.default_rng(67)
    messages = [("batch", _frames(wire.batch_frames(batch.take(np.arange(7)), (1.0, 2.0)))),
                ("reply", _frames(wire.reply_frames(("scored", scored.take(np.arange(5)))))),
                ("reply", _frames(wire.reply_frames(("error", "e"))))]  # fmt: skip
    refused = 0
    for _ in range(600):
        reader, frames = messages[int(rng.integers(len(messages)))]
        frames = list(frames)
        i = int(rng.integers(len(frames)))
        f = bytearray(frames[i])
        match int(rng.integers(4)):
            case 0 if f:
                del f[int(rng.integers(len(f))) :]
            case 1:
                f += bytes(rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8))
            case 2 if f:
                f[int(rng.integers(len(f)))] ^= 1 << int(rng.integers(8))
            case _:
                frames.insert(int(rng.integers(len(frames) + 1)), bytes(f))
        frames[i] = bytes(f)
        try:
            READERS[reader](frames)
        except wire.FrameError:
            refused += 1
    assert refused > 400, refused  # most mangling is caught (a flipped bit in a float can still be a float)
