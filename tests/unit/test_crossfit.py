"""Cross-fitting a run's discriminant (`rtsearch.search.crossfit`): folds, the decoy scale, no PSM scored by a fit
that trained on it."""

from __future__ import annotations

import numpy as np

from rtsearch.search import crossfit
from rtsearch.search.lda import Discriminant
from rtsearch.search.target import RunFit


def test_folds_are_even_seeded_and_shuffled() -> None:
    fold = crossfit.folds_of(301)
    assert np.bincount(fold).tolist() == [101, 100, 100]
    assert np.array_equal(fold, crossfit.folds_of(301))
    assert not np.array_equal(fold, np.arange(301) % 3)


def test_the_decoy_scale_by_hand() -> None:
    # decoys 1, 2, 3, 4, 100: median 3, |deviations| 2, 1, 0, 1, 97, their median 1, spread 1.4826
    null = np.array([1.0, 2.0, 3.0, 4.0, 100.0, np.nan])
    got = crossfit.on_decoy_scale(np.array([3.0, 3.0 + 1.4826, 0.0]), null)
    np.testing.assert_allclose(got, [0.0, 1.0, -3 / 1.4826])
    np.testing.assert_array_equal(crossfit.on_decoy_scale(np.array([2.0]), np.array([5.0, 5.0])), [-3.0])


class Recorder:
    """A target whose fit remembers what it trained on and scores each PSM by the first feature."""

    learns = True

    def __init__(self) -> None:
        self.trained: list[np.ndarray] = []

    def fit_run(self, x, decoy, ids, rt, *, train=None) -> RunFit:
        self.trained.append(train.copy())
        disc = Discriminant(("a",), np.zeros(1), np.ones(1), np.ones(1))
        return RunFit(x[:, 0] + len(self.trained), disc, x + 0.5)


def test_no_psm_is_scored_by_a_fit_that_trained_on_it() -> None:
    rng = np.random.default_rng(7)
    best, lower = 240, 60
    x = rng.normal(size=(best + lower, 1))
    decoy = rng.random(best + lower) < 0.5
    of_best = rng.integers(0, best, lower)
    place = rng.permutation(best)
    target = Recorder()
    got = crossfit.cross_fit(target, x, decoy, np.arange(best + lower), np.zeros(best + lower), best=best,
                             of_best=of_best, place=place)  # fmt: skip
    assert len(target.trained) == crossfit.FOLDS
    fold = crossfit.folds_of(best)[place]
    fold = np.r_[fold, fold[of_best]]  # a lower-ranked PSM in its spectrum's fold
    for k, train in enumerate(target.trained):
        assert not train[best:].any()  # lower ranks never train
        assert np.array_equal(train[:best], fold[:best] != k)
        scored = fold == k
        null = x[:best, 0][(fold[:best] == k) & decoy[:best]] + k + 1
        np.testing.assert_allclose(got.score[scored], crossfit.on_decoy_scale(x[scored, 0] + k + 1, null))
    np.testing.assert_array_equal(got.features, x + 0.5)


def test_a_small_run_or_a_kind_that_fits_nothing_is_scored_once() -> None:
    x = np.arange(10.0).reshape(-1, 1)
    for best, learns in ((crossfit.MIN_SPECTRA - 1, True), (crossfit.MIN_SPECTRA, False)):
        target = Recorder()
        target.learns = learns
        n = max(best, 10)
        xs = np.resize(x, (n, 1))
        got = crossfit.cross_fit(target, xs, np.zeros(n, bool), np.arange(n), np.zeros(n), best=n,
                                 of_best=np.zeros(0, np.int64), place=np.arange(n))  # fmt: skip
        assert len(target.trained) == 1 and target.trained[0].all()
        np.testing.assert_array_equal(got.score, xs[:, 0] + 1)
