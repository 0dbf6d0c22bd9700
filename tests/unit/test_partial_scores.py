"""A target cut by precursor mass gives one engine's answers (`rtsearch.scoring.database.partial`,
`PeptideIndex.slice`): the bundled real run scored by three engines each holding only its slice of the bundled
index, every query on the slice holding its mass, the best chosen over the merged queries, equals one engine's
`score` field for field — including spectra whose charges fall in two pieces."""

from __future__ import annotations

import dataclasses
from dataclasses import fields

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.database.fragments import slice_fragments
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.features import FEATURES
from rtsearch.scoring.database.partial import merge
from rtsearch.search.database import DatabaseTarget


@pytest.fixture(scope="module")
def whole(demo_index) -> DatabaseTarget:
    return DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))


@pytest.fixture(scope="module")
def batch() -> SpectraBatch:
    # unknown charges as well (the configured ones are tried: several queries a spectrum)
    spectra = list(read_spectra(bundled(RUN)))
    for k in range(0, len(spectra), 3):
        spectra[k] = dataclasses.replace(spectra[k], charges=())
    return SpectraBatch.of(spectra)


def test_a_slice_of_the_fragment_index_is_the_index_of_its_peptides(demo_index) -> None:
    frag = demo_index.fragments
    n = len(demo_index)
    a, b = n // 3, 2 * n // 3
    part = slice_fragments(frag, a, b)
    keep = (frag.peptide >= a) & (frag.peptide < b)
    assert part.mz.shape[0] == int(keep.sum()) and part.peptide.max() == b - a - 1
    # the same (m/z, peptide) pairs, bucketed as the build buckets: m/z ascending between buckets, peptide within
    # (arrays sorted and compared whole: the same check over Python tuples took 19 s on the 2-core development machine)
    mine, theirs = np.lexsort((part.peptide + a, part.mz)), np.lexsort((frag.peptide[keep], frag.mz[keep]))
    assert np.array_equal(part.mz[mine], frag.mz[keep][theirs])
    assert np.array_equal((part.peptide + a)[mine], frag.peptide[keep][theirs])
    B = part.bucket_size
    starts = np.arange(0, len(part.mz), B)
    lows, highs = np.minimum.reduceat(part.mz, starts), np.maximum.reduceat(part.mz, starts)
    assert part.bucket_min_mz.tolist() == lows.tolist()
    assert np.all(highs[:-1] <= lows[1:])
    within = np.arange(1, len(part.mz)) % B != 0  # neighbours in one bucket
    assert np.all(np.diff(part.peptide.astype(np.int64))[within] >= 0)


def test_three_slices_answer_as_one_engine(whole: DatabaseTarget, batch: SpectraBatch) -> None:
    want = whole.score(batch)
    spectrum, mass, _ = whole.query_masses(batch)
    cuts = np.quantile(mass, [1 / 3, 2 / 3])
    bounds = [-np.inf, *cuts.tolist(), np.inf]
    parts = []
    held = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        piece = whole.reopen_slice((lo, hi), "numpy")()
        held.append(len(piece.index))
        rows = np.unique(spectrum[(mass >= lo) & (mass < hi)])
        parts.append((rows, piece.score_queries(batch.take(rows), (lo, hi))))
    assert max(held) < len(whole.index) and sum(held) < 1.2 * len(whole.index)  # slices, a window's overlap apart
    pieces_of = np.zeros(len(batch), np.int64)
    for rows, _ in parts:
        pieces_of[rows] += 1
    assert (pieces_of == 2).sum() > 20  # spectra whose queries two slices scored
    got = whole.best_of(batch, merge(parts, len(batch)))
    assert got.reason == want.reason
    assert (want.best.match >= 0).sum() > 100
    for f in fields(want.best):
        if f.name != "features":
            assert np.array_equal(getattr(got.best, f.name), getattr(want.best, f.name), equal_nan=True), f.name
    # every feature exactly, but xcorr to its last bits: NumPy sums each candidate's ions padded to the longest
    # peptide of its chunk of queries, and pairwise summation rounds by length (one engine's batches do the same)
    x = FEATURES.index("xcorr")
    for j, name in enumerate(FEATURES):
        g, w = got.best.features[:, j], want.best.features[:, j]
        same = np.allclose(g, w, rtol=1e-13, atol=0, equal_nan=True) if j == x else np.array_equal(g, w, equal_nan=True)
        assert same, name
