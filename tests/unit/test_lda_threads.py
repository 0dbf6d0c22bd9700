"""The discriminant's start (`rtsearch.search.lda.best_feature`) ranks features on threads from `THREADED_FROM`
PSMs: the same choice, sign and tie-break as one feature after another."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.search import lda


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_features_ranked_on_threads_choose_as_one_after_another(seed: int, monkeypatch) -> None:
    rng = np.random.default_rng(seed)
    n, f = 30_000, 9
    x, decoy = rng.normal(size=(n, f)), rng.random(n) < 0.4
    x[~decoy, 2] += 0.5 if seed == 3 else 1.0  # feature 2 separates best...
    if seed == 3:  # ...or, lower better, feature 6
        x[~decoy, 6] -= 1.2
    if seed == 2:  # a tie with feature 2: the first wins
        x[:, 7] = x[:, 2]
    x[::11, 4] = np.nan
    monkeypatch.setattr(lda.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(lda, "THREADED_FROM", 10**12)
    alone = lda.best_feature(x, decoy)
    monkeypatch.setattr(lda, "THREADED_FROM", 1_000)
    threaded = lda.best_feature(x, decoy)
    want = np.zeros(f)
    want[6 if seed == 3 else 2] = -1.0 if seed == 3 else 1.0
    assert np.array_equal(alone, want) and np.array_equal(threaded, want)
