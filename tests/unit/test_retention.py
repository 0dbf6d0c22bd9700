"""The retention-time feature stays finite whatever times a run gives (issue 67, S2: one spectrum at rt 1e308
overflowed the fit, the NaN feature broke the run's q-values, and its run.end failed)."""

from __future__ import annotations

import numpy as np

from rtsearch.scoring.database.retention import MIN_TRAINING, rt_error


def test_retention_error_is_fitted_and_stays_finite_for_absurd_times(demo_index) -> None:
    rng = np.random.default_rng(7)
    peptides = rng.choice(len(demo_index.forms.base), 40, replace=False)
    rt = np.linspace(100.0, 4000.0, 40)
    train = np.ones(40, bool)
    fitted = rt_error(demo_index, peptides, rt, train)
    assert np.isfinite(fitted).all() and fitted.max() > 0  # fitted on 40 > MIN_TRAINING PSMs
    assert MIN_TRAINING < 40
    rt[7] = 1e308
    absurd = rt_error(demo_index, peptides, rt, train)
    assert np.isfinite(absurd).all()
