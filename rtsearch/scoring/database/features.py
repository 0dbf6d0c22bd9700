"""The best candidates of each spectrum (one or more ranks) and their features.

Candidates of all charges of a spectrum compete on the primary score
(hyperscore or dot product); ties go to the lower peptide index. The features
feed the run's linear discriminant (`rtsearch.search.lda`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from rtsearch.database.index import PeptideIndex
from rtsearch.matches import BestMatches
from rtsearch.scoring.database.candidates import Queries, in_windows
from rtsearch.scoring.database.matching import MatchStats
from rtsearch.types import C13_DELTA, PROTON, Tolerance

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
    "frag_error",
    "ppm_error_z2",  # |ppm| here; the run's squared z-score once its discriminant is fitted (search.database)
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


_LOG_FACTORIAL = np.array([math.lgamma(n + 1.0) for n in range(4096)])


def poisson_evidence(matched: np.ndarray, expected: np.ndarray, terms: int = 60) -> np.ndarray:
    """-log10 P(X >= matched) for X ~ Poisson(expected): how unlikely the matches are by chance.

    The tail is summed over ``terms`` terms in log space (ample: the terms
    fall off faster than geometrically once past the mean).
    """
    k = np.minimum(matched[:, None] + np.arange(terms)[None, :], _LOG_FACTORIAL.shape[0] - 1)
    lam = np.maximum(expected, 1e-12)[:, None]
    logp = k * np.log(lam) - lam - _LOG_FACTORIAL[k]
    top = logp.max(axis=1, keepdims=True)
    log_tail = top[:, 0] + np.log(np.exp(logp - top).sum(axis=1))
    return np.maximum(-log_tail / np.log(10.0), 0.0)


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
    ranks: int = 1,
) -> list[BestMatches]:
    """Each spectrum's ``ranks`` best peptides and their features, best first.

    Rank r is the best (query, candidate) once the peptides of ranks 1..r-1 are set aside, so its
    ``delta_score`` is its lead over rank r + 1 and its ``score_z`` is against the candidates below it.
    """
    score = np.where(cand >= 0, np.asarray(getattr(stats, primary), dtype=np.float64), -np.inf)
    rank = functools.partial(_ranked, index, queries, cand, prelim, stats, n_spectra,
                             precursor_tolerance=precursor_tolerance, isotope_errors=isotope_errors,
                             match_probability=match_probability, max_fragment_charge=max_fragment_charge)  # fmt: skip
    if len(queries) == 0:
        return [rank(score)[0] for _ in range(ranks)]
    out = []
    for r in range(ranks):
        best, group_pep = rank(score)
        out.append(best)
        if r + 1 < ranks:  # this rank's peptide set aside in every query of its spectrum
            score = np.where(cand == group_pep[:, None], -np.inf, score)
    return out


def _ranked(
    index: PeptideIndex,
    queries: Queries,
    cand: np.ndarray,
    prelim: np.ndarray,
    stats: MatchStats,
    n_spectra: int,
    score: np.ndarray,
    *,
    precursor_tolerance: Tolerance,
    isotope_errors: tuple[int, ...],
    match_probability: np.ndarray,
    max_fragment_charge: int,
) -> tuple[BestMatches, np.ndarray]:
    """The best of ``score`` (-inf: not a candidate) per spectrum, its features, and per query its spectrum's
    chosen peptide (int64 max where none)."""
    out_pep = np.full(n_spectra, -1, dtype=np.int64)
    feats = np.zeros((n_spectra, len(FEATURES)))
    charge = np.zeros(n_spectra, dtype=np.int64)
    calc_mz = np.full(n_spectra, np.nan)
    ppm = np.full(n_spectra, np.nan)
    matched = np.zeros(n_spectra, dtype=np.int64)
    big = np.iinfo(np.int64).max
    if len(queries) == 0:
        return BestMatches(out_pep, charge, calc_mz, ppm, matched, feats), np.zeros(0, np.int64)
    # No sort: row maxima, then maxima over each spectrum's consecutive queries.
    # Ties: higher score, then lower peptide index, then the earlier query.
    row_best = score.max(axis=1)
    row_k = np.where(score == row_best[:, None], cand, big).argmin(axis=1)
    row_pep = cand[np.arange(len(queries)), row_k]
    spec_ids, starts = np.unique(queries.spectrum, return_index=True)
    group = np.repeat(np.arange(spec_ids.shape[0]), np.diff(np.r_[starts, len(queries)]))
    top = np.maximum.reduceat(row_best, starts)
    at_top = row_best == top[group]
    top_pep = np.minimum.reduceat(np.where(at_top, row_pep, big), starts)
    top_pep = np.where(np.isfinite(top), top_pep, big)
    chosen = at_top & (row_pep == top_pep[group])
    first_q = np.minimum.reduceat(np.where(chosen, np.arange(len(queries)), big), starts)
    found = np.isfinite(top)
    sp = spec_ids[found]
    bq = first_q[found]
    bk = row_k[bq]
    bp = row_pep[bq]
    bs = top[found]
    # next best entry of another peptide, and the spread of the others
    valid = np.isfinite(score)
    other = np.where(cand == top_pep[group][:, None], -np.inf, score).max(axis=1)
    next_s = np.maximum.reduceat(other, starts)[found]
    has_next = np.isfinite(next_s)
    delta = np.where(has_next, bs - np.where(has_next, next_s, 0.0), bs)
    s0 = np.where(valid, score, 0.0)
    n_in = np.add.reduceat(valid.sum(axis=1), starts)[found]
    sum_all = np.add.reduceat(s0.sum(axis=1), starts)[found]
    sq_all = np.add.reduceat((s0 * s0).sum(axis=1), starts)[found]
    n_o = np.maximum(n_in - 1, 1)
    mean_o = (sum_all - bs) / n_o
    var_o = np.maximum((sq_all - bs * bs) / n_o - mean_o**2, 0.0)
    score_z = np.where(n_in > 2, (bs - mean_o) / np.sqrt(var_o + 1e-6), 0.0)
    group_pep = top_pep[group]
    if sp.size == 0:
        return BestMatches(out_pep, charge, calc_mz, ppm, matched, feats), group_pep

    z = queries.charge[bq]
    mass = queries.mass[bq]
    pmass = np.asarray(index.mass[bp], dtype=np.float64)
    _, iso = in_windows(mass, pmass, precursor_tolerance, isotope_errors)
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
        "frag_error": stats.frag_error[bq, bk],
        "ppm_error_z2": np.abs(err),
        "signed_ppm_error": err,
        "isotope_error": iso,
        "charge": z,
        "length": length,
        "missed_cleavages": np.asarray(index.missed_cleavages(bp), dtype=np.float64),
        "variable_mods": n_var,
        "prelim_count": prelim[bq, bk],
        "log_candidates": np.log1p(queries.hi[bq] - queries.lo[bq]),
        "rt_error": np.zeros(sp.shape[0]),  # filled per run by rtsearch.search.table
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
    return BestMatches(out_pep, charge, calc_mz, ppm, matched, feats), group_pep
