"""A cluster worker scores the batches waiting for it as one (`rtsearch.cluster.worker.answer`): what several lanes'
doors (or one door's batches queued behind each other) sent comes back to each, spectrum for spectrum, as the batch
scored alone would have; a batch the merged scoring fails on is scored again alone, its failure its own."""

from __future__ import annotations

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import TOML, bundled
from rtsearch.cluster.worker import Ask, answer
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import named


def _batches(data) -> list[SpectraBatch]:
    ms2 = [s for s in read_spectra(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2]
    return [SpectraBatch.of(ms2[a:b]) for a, b in ((0, 17), (17, 18), (18, 60))]  # uneven, one of a lone spectrum


def _same(got, want) -> None:
    assert got.scan.tolist() == want.scan.tolist()
    assert got.best.match.tolist() == want.best.match.tolist()
    assert got.best.charge.tolist() == want.best.charge.tolist()
    np.testing.assert_allclose(got.best.features, want.best.features, rtol=1e-6)
    assert got.names.peptides == want.names.peptides and got.names.proteins == want.names.proteins


def test_batches_scored_as_one_answer_each_as_alone(demo_index, data) -> None:
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    batches = _batches(data)
    asks = [Ask(k % 2, str(k).encode(), b, None, 0) for k, b in enumerate(batches)]  # two doors' batches
    replies = answer(target, asks, "w0")
    assert [kind for kind, _ in replies] == ["scored"] * 3
    for (_, got), batch in zip(replies, batches, strict=True):
        _same(got, named(target, target.score(batch)))
    assert sum((r.best.match >= 0).sum() for _, r in replies) > 20  # real identifications, not empty answers


def test_a_batch_the_merged_scoring_fails_on_fails_alone(demo_index, data) -> None:
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    batches = _batches(data)
    bad = int(batches[1].scan[0])

    class Failing:  # the real target, failing on any batch holding the lone spectrum's scan
        def __getattr__(self, name: str):
            return getattr(target, name)

        def score(self, batch: SpectraBatch):
            if bad in batch.scan.tolist():
                raise RuntimeError(f"scan {bad} breaks the engine")
            return target.score(batch)

    replies = answer(Failing(), [Ask(0, b"a", batches[0], None, 0), Ask(1, b"b", batches[1], None, 0),
                                 Ask(1, b"c", batches[2], None, 0)], "w1")  # fmt: skip
    assert replies[1] == ("error", f"w1: RuntimeError: scan {bad} breaks the engine")
    for k in (0, 2):
        assert replies[k][0] == "scored"
        _same(replies[k][1], named(target, target.score(batches[k])))
