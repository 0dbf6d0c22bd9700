"""The best candidate of each spectrum and its features.

Candidates of all charges of a spectrum compete on the primary score
(hyperscore or dot product); ties go to the lower peptide index. The features
feed the run's linear discriminant (`rtsearch.scoring.lda`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtsearch.index.database import PeptideIndex
from rtsearch.scoring.candidates import Queries, in_windows
from rtsearch.scoring.matching import MatchStats
from rtsearch.types import PROTON, Tolerance

FEATURES: tuple[str, ...] = (
    "hyperscore",
    "dot",
    "xcorr",
    "delta_score",
    "score_z",
    "matched_ions",
    "matched_b",
    "matched_y",
    "ion_fraction",
    "matched_peaks",
    "explained_intensity",
    "longest_run",
    "abs_ppm_error",
    "signed_ppm_error",
    "isotope_error",
    "charge",
    "length",
    "missed_cleavages",
    "variable_mods",
    "prelim_count",
    "log_candidates",
    "poisson",
    "rt_error",
)


def poisson_evidence(matched: np.ndarray, expected: np.ndarray, terms: int = 60) -> np.ndarray:
    """-log10 P(X >= matched) for X ~ Poisson(expected): how unlikely the matches are by chance.

    The tail is summed over ``terms`` terms in log space (ample: the terms
    fall off faster than geometrically once past the mean).
    """
    from math import lgamma

    k = matched[:, None] + np.arange(terms)[None, :]
    lam = np.maximum(expected, 1e-12)[:, None]
    lg = np.vectorize(lgamma, otypes=[float])(k + 1.0)
    logp = k * np.log(lam) - lam - lg
    top = logp.max(axis=1, keepdims=True)
    log_tail = top[:, 0] + np.log(np.exp(logp - top).sum(axis=1))
    return np.maximum(-log_tail / np.log(10.0), 0.0)


@dataclass
class BestMatches:
    """Per spectrum (S rows): the top match and its features; ``peptide`` is -1 where none."""

    peptide: np.ndarray  # int64 [S]
    charge: np.ndarray  # int64 [S]
    calc_mz: np.ndarray  # float64 [S]
    ppm_error: np.ndarray  # float64 [S]
    matched_peaks: np.ndarray  # int64 [S]
    features: np.ndarray  # float64 [S, len(FEATURES)]


def best_matches(
    index: PeptideIndex,
    queries: Queries,
    cand: np.ndarray,
    prelim: np.ndarray,
    stats: MatchStats,
    n_spectra: int,
    *,
    primary: str,
    precursor_tolerance: Tolerance,
    isotope_errors: tuple[int, ...],
    match_probability: np.ndarray,
    max_fragment_charge: int,
) -> BestMatches:
    """Pick each spectrum's best (query, candidate) and compute its features."""
    score = np.asarray(getattr(stats, primary), dtype=np.float64)
    qi, ki = np.nonzero(cand >= 0)
    spec = queries.spectrum[qi]
    pep = cand[qi, ki]
    s = score[qi, ki]
    order = np.lexsort((pep, -s, spec))
    qi, ki, spec, pep, s = qi[order], ki[order], spec[order], pep[order], s[order]
    out_pep = np.full(n_spectra, -1, dtype=np.int64)
    feats = np.zeros((n_spectra, len(FEATURES)))
    charge = np.zeros(n_spectra, dtype=np.int64)
    calc_mz = np.full(n_spectra, np.nan)
    ppm = np.full(n_spectra, np.nan)
    matched = np.zeros(n_spectra, dtype=np.int64)
    if spec.size == 0:
        return BestMatches(out_pep, charge, calc_mz, ppm, matched, feats)
    first = np.r_[True, spec[1:] != spec[:-1]]
    starts = np.flatnonzero(first)
    sp = spec[starts]
    bq, bk, bp, bs = qi[starts], ki[starts], pep[starts], s[starts]
    # next best entry of another peptide
    group = np.cumsum(first) - 1
    other = pep != bp[group]
    idx_other = np.where(other, np.arange(spec.size), spec.size)
    nxt = np.full(starts.size, spec.size)
    np.minimum.at(nxt, group, idx_other)
    has_next = nxt < spec.size
    next_s = np.where(has_next, s[np.minimum(nxt, spec.size - 1)], 0.0)
    delta = np.where(has_next, bs - next_s, bs)
    # spread of the other candidates' scores (an E-value-like feature)
    n_in = np.bincount(group, minlength=starts.size)
    sum_all = np.bincount(group, weights=s, minlength=starts.size)
    sq_all = np.bincount(group, weights=s * s, minlength=starts.size)
    n_o = np.maximum(n_in - 1, 1)
    mean_o = (sum_all - bs) / n_o
    var_o = np.maximum((sq_all - bs * bs) / n_o - mean_o**2, 0.0)
    score_z = np.where(n_in > 2, (bs - mean_o) / np.sqrt(var_o + 1e-6), 0.0)

    z = queries.charge[bq]
    mass = queries.mass[bq]
    pmass = np.asarray(index.mass[bp], dtype=np.float64)
    _, iso = in_windows(mass, pmass, precursor_tolerance, isotope_errors)
    from rtsearch.types import C13_DELTA

    err = (mass - iso * C13_DELTA - pmass) / pmass * 1e6
    length = np.asarray(index.length(bp), dtype=np.float64)
    n_b = stats.n_b[bq, bk]
    n_y = stats.n_y[bq, bk]
    n_var = (np.asarray(index.forms.mod_pos[bp]) >= 0).sum(axis=1) if index.forms.mod_pos.shape[1] else 0
    cols = {
        "hyperscore": stats.hyperscore[bq, bk],
        "dot": stats.dot[bq, bk],
        "xcorr": stats.xcorr[bq, bk],
        "delta_score": delta,
        "score_z": score_z,
        "matched_ions": n_b + n_y,
        "matched_b": n_b,
        "matched_y": n_y,
        "ion_fraction": (n_b + n_y) / np.maximum(2 * (length - 1), 1),
        "matched_peaks": stats.matched_peaks[bq, bk],
        "explained_intensity": stats.explained[bq, bk],
        "longest_run": stats.longest_run[bq, bk],
        "abs_ppm_error": np.abs(err),
        "signed_ppm_error": err,
        "isotope_error": iso,
        "charge": z,
        "length": length,
        "missed_cleavages": np.asarray(index.missed_cleavages(bp), dtype=np.float64),
        "variable_mods": n_var,
        "prelim_count": prelim[bq, bk],
        "log_candidates": np.log1p(queries.hi[bq] - queries.lo[bq]),
        "rt_error": np.zeros(sp.shape[0]),  # filled per run by rtsearch.psms
        "poisson": poisson_evidence(
            (n_b + n_y).astype(np.int64),
            2 * (length - 1) * np.clip(z - 1, 1, max_fragment_charge) * match_probability[sp],
        ),
    }
    for j, name in enumerate(FEATURES):
        feats[sp, j] = cols[name]
    out_pep[sp] = bp
    charge[sp] = z
    calc_mz[sp] = pmass / z + PROTON
    ppm[sp] = err
    matched[sp] = stats.matched_peaks[bq, bk].astype(np.int64)
    return BestMatches(out_pep, charge, calc_mz, ppm, matched, feats)
