"""Retention time predicted from amino-acid composition, fitted per run.

As in Sage (Lazear 2023, J. Proteome Res. 22:3652): a ridge regression of the
observed retention time on the peptide's residue composition, fitted on the
run's confident target PSMs; the feature is the absolute difference between
observed and predicted time as a fraction of the run's time range. Peptides
of similar composition elute together, so a wrong match often elutes "wrong".
"""

from __future__ import annotations

import numpy as np

from rtsearch.database.index import PeptideIndex
from rtsearch.database.mods import ALPHABET

MIN_TRAINING = 15
RIDGE = 1.0


def composition(index: PeptideIndex, peptides: np.ndarray) -> np.ndarray:
    """Residue counts ``[n, len(ALPHABET) + 1]`` (the last column is 1, the intercept)."""
    base = np.asarray(index.forms.base[peptides], dtype=np.int64)
    starts = np.asarray(index.bases.offsets[base])
    lengths = np.asarray(index.bases.offsets[base + 1]) - starts
    row = np.repeat(np.arange(peptides.shape[0]), lengths)
    pos = np.repeat(starts, lengths) + (np.arange(row.shape[0]) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    codes = np.asarray(index.bases.residues)[pos].astype(np.int64)
    x = np.zeros((peptides.shape[0], len(ALPHABET) + 1))
    np.add.at(x, (row, codes - 1), 1.0)
    x[:, -1] = 1.0
    return x


def rt_error(index: PeptideIndex, peptides: np.ndarray, rt: np.ndarray, train: np.ndarray) -> np.ndarray:
    """|observed − predicted| / RT range for every PSM; zeros when it cannot be fitted.

    Parameters
    ----------
    peptides
        Peptide index of each PSM.
    rt
        Observed retention time (seconds) of each PSM; 0 means unknown.
    train
        Mask of the PSMs to fit on (confident targets).
    """
    known = rt > 0
    fit_rows = train & known
    out = np.zeros(peptides.shape[0])
    if fit_rows.sum() < MIN_TRAINING:
        return out
    x = composition(index, peptides)
    xt, yt = x[fit_rows], rt[fit_rows]
    reg = RIDGE * np.eye(x.shape[1])
    reg[-1, -1] = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        coef = np.linalg.solve(xt.T @ xt + reg, xt.T @ yt)
        span = max(float(rt[known].max() - rt[known].min()), 1e-9)
        out[known] = np.abs(rt[known] - x[known] @ coef) / span
    if not np.isfinite(out).all():  # absurd times (a file's rt of 1e308) overflow the fit: no feature, not NaN
        return np.zeros(peptides.shape[0])  # (a NaN feature broke the run's q-values: issue 67, S2)
    return out
