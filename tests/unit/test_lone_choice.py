"""A lone spectrum's best match in scalars (`rtsearch.scoring.database.lone.best_one`) is the batch path's.

Every spectrum of the bundled E. coli run, with its charge and with the configured charges instead (several queries
a spectrum), scored alone on NumPy: `best_one` gives bit for bit what `best_matches` gives for ``n_spectra = 1``;
and `Engine.score` of a lone spectrum (which takes that path) equals its row of the whole run scored as one batch
(its features to rounding: a wider batch sums the statistics' peaks in another order).
Hand-made cases fix the choice's ties and the spectra without a finite best.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.matches import BestMatches
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.candidates import Queries
from rtsearch.scoring.database.engine import Engine
from rtsearch.scoring.database.features import FEATURES, best_matches
from rtsearch.scoring.database.lone import best_one
from rtsearch.scoring.database.matching import MatchStats

FIELDS = ("match", "charge", "calc_mz", "ppm_error", "matched_peaks", "features")
_DELTA, _Z = FEATURES.index("delta_score"), FEATURES.index("score_z")


def _same(a: BestMatches, b: BestMatches) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True) for f in FIELDS)


def _both(index, search, queries, cand, prelim, stats, match_probability) -> tuple[BestMatches, BestMatches]:
    kw = dict(primary=search.score, precursor_tolerance=search.precursor_tolerance,
              isotope_errors=search.isotope_errors, match_probability=match_probability,
              max_fragment_charge=search.max_fragment_charge)  # fmt: skip
    (batch,) = best_matches(index, queries, cand, prelim, stats, 1, ranks=1, **kw)
    return batch, best_one(index, queries, cand, prelim, stats, **kw)


@pytest.fixture(scope="module")
def search():
    return load_config(bundled(TOML)).search


@pytest.fixture(scope="module")
def spectra():
    return [s for s in read_spectra(bundled(RUN)) if s.ms_level == 2]


@pytest.mark.parametrize("charges", ["given", "configured"])
def test_every_real_spectrum_alone_gets_the_batch_paths_best(demo_index, search, spectra, charges) -> None:
    engine = Engine(demo_index, search, get_backend("numpy"))
    if charges == "configured":  # no charge given: a query per configured charge
        spectra = [dataclasses.replace(s, charges=()) for s in spectra]
    matched = several = 0
    for s in spectra:
        scored = engine.score_queries(SpectraBatch.of([s]))
        batch, lone = _both(demo_index, search, scored.queries, scored.cand, scored.prelim, scored.stats,
                            scored.match_probability)  # fmt: skip
        assert _same(batch, lone), s.scan
        matched += int(lone.match[0] >= 0)
        several += int(len(scored.queries) > 1)
    assert matched > 0.8 * len(spectra)
    assert (several == len(spectra)) == (charges == "configured") and len(search.charges) > 1


def test_a_lone_spectrum_scores_as_its_row_of_the_batch(demo_index, search, spectra) -> None:
    engine = Engine(demo_index, search, get_backend("numpy"))
    whole = engine.score(SpectraBatch.of(spectra))
    for i, s in enumerate(spectra):
        alone = engine.score(SpectraBatch.of([s]))
        row = whole.best.take(np.array([i]))
        for f in ("match", "charge", "matched_peaks", "calc_mz", "ppm_error"):
            assert np.array_equal(getattr(alone.best, f), getattr(row, f), equal_nan=True), (s.scan, f)
        # the statistics of a lone spectrum's row sum its peaks in another order than a wider batch's (xcorr's last
        # bits): the features agree to rounding
        np.testing.assert_allclose(alone.best.features, row.features, rtol=1e-12, atol=0)
        assert alone.reason == [whole.reason[i]]


def _stats(hyper: np.ndarray) -> MatchStats:
    zeros = np.zeros_like(hyper)
    return MatchStats(hyper, zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros)


@pytest.mark.parametrize(("cand", "hyper", "match", "delta"), [
    # two queries share peptide 9; 12.0 on query 1 is the best; the next other peptide's best is 10.0 (peptide 5)
    ([[5, 9, 11], [9, 7, -1]], [[10.0, 8.0, 10.0], [12.0, 3.0, 0.0]], 9, 2.0),
    # a tie at the top: the lower peptide number wins, and leads by nothing
    ([[11, 5, -1], [5, 11, -1]], [[7.0, 7.0, 0.0], [7.0, 7.0, 0.0]], 5, 0.0),
    # one candidate alone: it leads by its own score
    ([[4, -1, -1], [-1, -1, -1]], [[6.0, 0.0, 0.0], [0.0, 0.0, 0.0]], 4, 6.0),
    # no candidate, a NaN score, an infinite one: no match
    ([[-1, -1, -1], [-1, -1, -1]], [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], -1, 0.0),
    ([[3, 4, -1], [-1, -1, -1]], [[np.nan, 5.0, 0.0], [0.0, 0.0, 0.0]], -1, 0.0),
    ([[3, 4, -1], [-1, -1, -1]], [[np.inf, 5.0, 0.0], [0.0, 0.0, 0.0]], -1, 0.0),
    # -inf where a candidate is: left out of the count, the sums and the lead
    ([[3, 4, 6], [8, -1, -1]], [[-np.inf, 5.0, 2.0], [4.5, 0.0, 0.0]], 4, 0.5),
])  # fmt: skip
def test_by_hand(demo_index, search, cand, hyper, match, delta) -> None:
    cand, hyper = np.array(cand), np.array(hyper)
    mass = np.asarray(demo_index.mass[[max(match, 0)] * 2], np.float64)
    queries = Queries(np.zeros(2, np.int64), np.array([2, 3]), mass, np.zeros(2, np.int64), np.full(2, 20))
    search = dataclasses.replace(search, score="hyperscore")
    batch, lone = _both(demo_index, search, queries, cand, np.zeros(cand.shape, np.int32), _stats(hyper),
                        np.full(1, 0.1))  # fmt: skip
    assert _same(batch, lone)
    assert lone.match[0] == match
    assert lone.features[0, _DELTA] == delta
