"""`rtsearch.search.lda.best_feature`, the discriminant's first direction: the feature (and sign) accepting the
most targets at 1 % FDR, the first such in feature order with + before -, whatever thread ranked which feature."""

from __future__ import annotations

import numpy as np

from rtsearch.search.lda import best_feature


def _ranked(n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Targets then decoys: a column that puts the 200 targets first accepts all 200 at q = 0."""
    decoy = np.r_[np.zeros(n // 2, bool), np.ones(n // 2, bool)]
    good = np.r_[np.arange(n // 2, 0, -1), -np.arange(n // 2)].astype(float)  # targets high, decoys low
    return good, decoy


def test_the_separating_feature_wins_either_sign() -> None:
    good, decoy = _ranked()
    noise = np.random.default_rng(7).normal(size=good.shape[0])
    z = np.c_[noise, np.zeros_like(good), -good]  # a column not fitted is all zeros
    assert best_feature(z, decoy).tolist() == [0.0, 0.0, -1.0]
    assert best_feature(np.c_[good, noise], decoy).tolist() == [1.0, 0.0]


def test_ties_go_to_the_first_feature_and_plus_before_minus() -> None:
    good, decoy = _ranked()
    z = np.c_[np.zeros_like(good), good, good, -good]
    for _ in range(5):  # threads finish in any order; the choice does not depend on it
        assert best_feature(z, decoy).tolist() == [0.0, 1.0, 0.0, 0.0]


def test_nothing_to_rank() -> None:
    decoy = np.array([False, True])
    assert best_feature(np.zeros((2, 3)), decoy).tolist() == [0.0, 0.0, 0.0]  # constant columns rank nothing
    assert best_feature(np.zeros((0, 3)), np.zeros(0, bool)).tolist() == [0.0, 0.0, 0.0]
    with_nan = np.c_[np.r_[np.nan, 1.0, 2.0, 0.5], np.zeros(4)]
    # NaN rows left out; a decoy tops either ranking, so none accepted: the first ranked feature, +, by the rule
    assert best_feature(with_nan, np.array([False, False, True, True])).tolist() == [1.0, 0.0]


def test_threads_choose_what_one_thread_chooses(monkeypatch) -> None:
    """Above `THREADED_MIN` PSMs the features are ranked on threads: the same direction as ranked one by one."""
    import rtsearch.search.lda as lda

    rng = np.random.default_rng(3)
    z = rng.normal(size=(3_000, 12))
    decoy = rng.random(3_000) < 0.4
    z[~decoy, 7] -= 1.0  # the separating feature, negative
    monkeypatch.setattr(lda, "THREADED_MIN", 10**9)
    serial = best_feature(z, decoy)
    monkeypatch.setattr(lda, "THREADED_MIN", 0)
    assert best_feature(z, decoy).tolist() == serial.tolist() and serial[7] == -1.0


def test_a_refit_reusing_the_unchanged_features_counts_is_the_fresh_fit() -> None:
    """`fit_run`'s second fit reuses the first's rankings of the features it did not calibrate: the same
    discriminant as a fit that ranks every feature again."""
    from rtsearch.search.lda import fit

    rng = np.random.default_rng(11)
    n = 12_000  # over THREADED_MIN: the ranking on threads
    decoy = rng.random(n) < 0.4
    x = rng.normal(size=(n, 6)) + np.where(decoy, 0.0, 0.8)[:, None] * np.array([1.0, 0.5, 0.0, 0.2, 0.0, 0.3])
    names = tuple(f"f{k}" for k in range(6))
    first = fit(x, decoy, names, start="f0")
    assert first.ranked is not None and len(first.ranked) == 6
    x[:, 2] = rng.normal(size=n) + np.where(decoy, 0.0, 3.0)  # a calibrated column: now the best alone
    known = [None if j == 2 else c for j, c in enumerate(first.ranked)]
    again, fresh = fit(x, decoy, names, start="f0", known=known), fit(x, decoy, names, start="f0")
    assert again.ranked == fresh.ranked and again.ranked != first.ranked
    assert np.array_equal(again.weights, fresh.weights)
