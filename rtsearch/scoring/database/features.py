"""The best candidates of each spectrum (one or more ranks) and their features.

Candidates of all charges of a spectrum compete on the primary score
(hyperscore or dot product); ties go to the lower peptide index. The features
feed the run's linear discriminant (`rtsearch.search.lda`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from rtsearch.database.index import PeptideIndex
from rtsearch.matches import BestMatches
from rtsearch.scoring.backend import array_module
from rtsearch.scoring.database.candidates import Queries, in_windows
from rtsearch.scoring.database.choice_kernel import choose_on_device
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
    "siblings",  # filled per run (rtsearch.scoring.database.siblings)
)


_LOG_FACTORIAL = np.array([math.lgamma(n + 1.0) for n in range(4096)])


def poisson_evidence(matched: np.ndarray, expected: np.ndarray, terms: int = 60) -> np.ndarray:
    """-log10 P(X >= matched) for X ~ Poisson(expected): how unlikely the matches are by chance.

    The tail is summed over ``terms`` terms in log space (ample: the terms
    fall off faster than geometrically once past the mean).
    """
    k = matched[:, None] + np.arange(terms)[None, :]
    np.minimum(k, _LOG_FACTORIAL.shape[0] - 1, out=k)
    lam = np.maximum(expected, 1e-12)[:, None]
    # the same arithmetic in one [S, terms] array, in place (each temporary of the expression was another array of
    # that size to write and read): 2,048 spectra 5.07-5.73 -> 4.20-4.89 ms, 256 within 2-5 % on the development
    # machine (the since-deleted probe poisson_probe.py, three runs); the same values bit for bit
    # (tests/unit/test_poisson_evidence.py)
    logp = k * np.log(lam)
    logp -= lam
    logp -= _LOG_FACTORIAL[k]
    top = logp.max(axis=1, keepdims=True)
    logp -= top
    np.exp(logp, out=logp)
    log_tail = top[:, 0] + np.log(logp.sum(axis=1))
    return np.maximum(-log_tail / np.log(10.0), 0.0)


def best_matches(
    index: PeptideIndex,
    queries: Queries,
    cand: Any,
    prelim: Any,
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
    ``cand``, ``prelim`` and ``stats`` may live on the GPU (CuPy): the choice over the [Q, k] candidates is made
    where they are, and only the chosen rows come to the host for their features.
    """
    xp = array_module(cand)
    # the candidates' scores (-inf: none); on the device the kernel reads them from the statistics at first
    score: Any = None
    if xp is np:
        score = np.where(cand >= 0, np.asarray(getattr(stats, primary), dtype=np.float64), -np.inf)
    groups = _Groups(queries.spectrum) if len(queries) else None
    out = []
    for r in range(ranks):
        if groups is None:
            out.append(_unmatched(n_spectra))
            continue
        chosen = _choose(score, cand, groups) if xp is np else _choose_on_device(xp, score, cand, prelim, stats,
                                                                                        groups, primary)  # fmt: skip
        out.append(_features(index, queries, chosen, prelim, stats, n_spectra, precursor_tolerance=precursor_tolerance,
                             isotope_errors=isotope_errors, match_probability=match_probability,
                             max_fragment_charge=max_fragment_charge))  # fmt: skip
        if r + 1 < ranks:  # this rank's peptide set aside in every query of its spectrum
            if score is None:
                score = xp.where(cand >= 0, xp.asarray(getattr(stats, primary), dtype=xp.float64), -xp.inf)
            score = xp.where(cand == xp.asarray(chosen.top_pep[groups.group])[:, None], -xp.inf, score)
    return out


def _unmatched(n: int) -> BestMatches:
    """``n`` spectra without a match as the engine gives them (features 0)."""
    return BestMatches(np.full(n, -1, np.int64), np.zeros(n, np.int64), np.full(n, np.nan), np.full(n, np.nan),
                       np.zeros(n, np.int64), np.zeros((n, len(FEATURES))))  # fmt: skip


class _Groups:
    """A batch's queries as consecutive groups, one per spectrum, and a [G, C] layout of them (C: the most queries
    a spectrum has) for reductions per spectrum."""

    def __init__(self, spectrum: np.ndarray) -> None:
        n = spectrum.shape[0]
        first = np.r_[True, spectrum[1:] != spectrum[:-1]]
        self.starts = np.flatnonzero(first)
        self.spectra = spectrum[self.starts]  # host: the spectrum of each group
        group = np.cumsum(first) - 1
        pos = np.arange(n) - self.starts[group]
        self.width = int(pos.max()) + 1
        self.group, self.pos = group, pos

    def reduce(self, values: np.ndarray, fill: float, how: str) -> np.ndarray:
        """Per group, ``how`` ("max", "min", "sum") of one value per query."""
        if self.width == 1:  # one query a spectrum (its charge given): the layout below is ``values`` as a column
            return getattr(values[:, None], how)(axis=1)
        laid = np.full((self.starts.shape[0], self.width), fill, dtype=values.dtype)
        laid[self.group, self.pos] = values
        return getattr(laid, how)(axis=1)


@dataclass
class _Chosen:
    """One rank's choice: per spectrum that has one, its spectrum, query, candidate column, peptide, score, lead over
    the next and z-score against the rest; per group, its peptide (int64 max where none). Host arrays."""

    sp: np.ndarray
    bq: np.ndarray
    bk: np.ndarray
    bp: np.ndarray
    bs: np.ndarray
    delta: np.ndarray
    score_z: np.ndarray
    top_pep: np.ndarray
    got: dict[str, np.ndarray] | None = None  # the chosen candidates' statistics and ``prelim``, when gathered already


def _choose(score: np.ndarray, cand: np.ndarray, g: _Groups) -> _Chosen:
    """Each spectrum's best (query, candidate) by ``score`` (-inf: none), on the host. No sort: row maxima, then
    maxima over each spectrum's queries. Ties: higher score, then lower peptide index, then the earlier query.
    The reference of `rtsearch.scoring.database.choice_kernel`."""
    big = np.iinfo(np.int64).max
    q = np.arange(score.shape[0])
    row_best = score.max(axis=1)
    row_k = np.where(score == row_best[:, None], cand, big).argmin(axis=1)
    row_pep = cand[q, row_k]
    top = g.reduce(row_best, -np.inf, "max")
    found = np.isfinite(top)
    at_top = row_best == top[g.group]
    top_pep = np.where(found, g.reduce(np.where(at_top, row_pep, big), big, "min"), big)
    group_pep = top_pep[g.group]
    chosen = at_top & (row_pep == group_pep)
    first_q = g.reduce(np.where(chosen, q, big), big, "min")
    # next best entry of another peptide, and the spread of the others
    valid = np.isfinite(score)
    next_s = g.reduce(np.where(cand == group_pep[:, None], -np.inf, score).max(axis=1), -np.inf, "max")
    s0 = np.where(valid, score, 0.0)
    n_in = g.reduce(valid.sum(axis=1), 0, "sum")
    sum_all = g.reduce(s0.sum(axis=1), 0.0, "sum")
    sq_all = g.reduce((s0 * s0).sum(axis=1), 0.0, "sum")
    f = np.flatnonzero(found)
    bq = first_q[f]
    bs = top[f]
    delta, score_z = _lead_and_z(bs, next_s[f], n_in[f], sum_all[f], sq_all[f])
    bk = row_k[bq]
    return _Chosen(g.spectra[f], bq, bk, row_pep[bq], bs, delta, score_z, top_pep)


def _lead_and_z(
    best: np.ndarray, next_s: np.ndarray, n_in: np.ndarray, sum_all: np.ndarray, sq_all: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``delta_score`` (the best's lead over the next peptide's best; the best itself when alone) and ``score_z``
    (against the other candidates' mean and spread, from their count, sum and sum of squares)."""
    has_next = np.isfinite(next_s)
    delta = np.where(has_next, best - np.where(has_next, next_s, 0.0), best)
    n_o = np.maximum(n_in - 1, 1)
    mean_o = (sum_all - best) / n_o
    var_o = np.maximum((sq_all - best * best) / n_o - mean_o**2, 0.0)
    return delta, np.where(n_in > 2, (best - mean_o) / np.sqrt(var_o + 1e-6), 0.0)


def _choose_on_device(
    cp: Any, score: Any, cand: Any, prelim: Any, stats: MatchStats, g: _Groups, primary: str
) -> _Chosen:  # fmt: skip
    """`_choose` by one CUDA kernel (`rtsearch.scoring.database.choice_kernel`), the chosen rows' statistics
    gathered there too; ``score`` None: the ``primary`` statistic where there is a candidate."""
    names = [f.name for f in fields(MatchStats)]
    starts = np.r_[g.starts, g.group.shape[0]]
    ints, floats = choose_on_device(cp, cand, prelim, [getattr(stats, n) for n in names], starts, score=score,
                                    primary=names.index(primary))  # fmt: skip
    f = np.flatnonzero(ints[0] >= 0)
    bq, bk, bp = ints[0, f], ints[1, f], ints[2, f]
    bs = floats[0, f]
    delta, score_z = _lead_and_z(bs, *floats[1:5, f])
    top_pep = np.where(ints[0] >= 0, ints[2], np.iinfo(np.int64).max)
    got = dict(zip([*names, "prelim"], floats[5:, f], strict=True))
    return _Chosen(g.spectra[f], bq, bk, bp, bs, delta, score_z, top_pep, got)


def _features(
    index: PeptideIndex,
    queries: Queries,
    c: _Chosen,
    prelim: Any,
    stats: MatchStats,
    n_spectra: int,
    *,
    precursor_tolerance: Tolerance,
    isotope_errors: tuple[int, ...],
    match_probability: np.ndarray,
    max_fragment_charge: int,
) -> BestMatches:
    """The chosen matches' features (`FEATURES`), on the host."""
    out = _unmatched(n_spectra)
    sp, bq, bk, bp = c.sp, c.bq, c.bk, c.bp
    if sp.size == 0:
        return out
    got = c.got
    if got is None:  # host arrays
        got = {f.name: np.asarray(getattr(stats, f.name)[bq, bk], dtype=np.float64) for f in fields(MatchStats)}
        got["prelim"] = prelim[bq, bk].astype(np.float64)
    z = queries.charge[bq]
    mass = queries.mass[bq]
    pmass = np.asarray(index.mass[bp], dtype=np.float64)
    _, iso = in_windows(mass, pmass, precursor_tolerance, isotope_errors)
    err = (mass - iso * C13_DELTA - pmass) / pmass * 1e6
    length = np.asarray(index.length(bp), dtype=np.float64)
    n_b, n_y = got["n_b"], got["n_y"]
    n_var = (np.asarray(index.forms.mod_pos[bp]) >= 0).sum(axis=1) if index.forms.mod_pos.shape[1] else 0
    cols = {
        "hyperscore": got["hyperscore"],
        "dot": got["dot"],
        "xcorr": got["xcorr"],
        "delta_score": c.delta,
        "score_z": c.score_z,
        "matched_ions": n_b + n_y,
        "matched_b": n_b,
        "matched_y": n_y,
        "ion_fraction": (n_b + n_y) / np.maximum(2 * (length - 1), 1),
        "matched_peaks": got["matched_peaks"],
        "explained_intensity": got["explained"],
        "longest_run": got["longest_run"],
        "frag_error": got["frag_error"],
        "ppm_error_z2": np.abs(err),
        "signed_ppm_error": err,
        "isotope_error": iso,
        "charge": z,
        "length": length,
        "missed_cleavages": np.asarray(index.missed_cleavages(bp), dtype=np.float64),
        "variable_mods": n_var,
        "prelim_count": got["prelim"],
        "log_candidates": np.log1p(queries.hi[bq] - queries.lo[bq]),
        "rt_error": np.zeros(sp.shape[0]),  # filled per run by rtsearch.search.table
        "siblings": np.zeros(sp.shape[0]),  # likewise
        "poisson": poisson_evidence(
            (n_b + n_y).astype(np.int64),
            2 * (length - 1) * np.clip(z - 1, 1, max_fragment_charge) * match_probability[sp],
        ),
    }
    for j, name in enumerate(FEATURES):
        out.features[sp, j] = cols[name]
    out.match[sp] = bp
    out.charge[sp] = z
    out.calc_mz[sp] = pmass / z + PROTON
    out.ppm_error[sp] = err
    out.matched_peaks[sp] = got["matched_peaks"].astype(np.int64)
    return out
