"""Binomial E-values of PrSMs: how often an alignment scores this well by chance, times the candidates a spectrum had.

What a spectrum's candidates are ranked by (cheap for every candidate and shift count); the PrSM chosen is then
given TopPIC's kind, a generating-function E-value (`rtsearch.scoring.topdown.generating`; Liu et al. 2012,
"Protein identification using top-down spectra", MCP 11:M111.008524). The null model here is of chance
coincidences:

- a spectrum's m inner PRMs lie over (0, M − H2O); a mass drawn at random lands within ±δ of one of them with
  probability p = 1 − exp(−2δm / (M − H2O)) (PRMs as a Poisson process of that density);
- an alignment with s shifts of a proteoform with n inner prefix masses chooses among s + 1 diagonals, so its
  chance score is bounded by a binomial over n(s + 1) trials of probability p;
- its p-value is that binomial's tail at the score, P(X ≥ k), and its E-value the p-value times the number of
  candidates the spectrum was compared with (``tests``: the database's forms within the precursor's shift range,
  and its truncated sub-sequences when those are searched).

Unlike the matched-PRM count, the E-value is comparable across spectra of different density and proteoforms of
different length, which is what ranking PrSMs for target-decoy FDR needs. ``-log10 E`` is the score PrSMs are
ranked by. Known exactly (tests/unit/test_topdown_evalue.py): the binomial tail against a direct sum. The tail
is summed here in log space rather than taken from SciPy's ``binom.sf``: SciPy is not otherwise a dependency,
and the sum is a few lines over a log-factorial table.
"""

from __future__ import annotations

import math

import numpy as np

from rtsearch.database.arrays import ranges

LOG10_FLOOR = -300.0  # p-values below 1e-300 are reported as such


def log10_binomial_tail(k: int, n: int, p: float) -> float:
    """``log10 P(X >= k)`` for X ~ Binomial(n, p) (0 when k <= 0, the floor when k > n)."""
    return float(log10_binomial_tails(np.array([k]), np.array([n]), np.array([p]))[0])


def log10_binomial_tails(k: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """`log10_binomial_tail` of each (k, n, p) at once: every tail's terms laid end to end, summed by row. A tail is
    summed from k to 12 standard deviations and 50 terms past the larger of k and the mean, not always to n: what
    lies beyond is below e⁻³⁴ of the sum (Chernoff's bound), and a PrSM's tail over a long proteoform (n in the
    hundreds, p ~ 10⁻³) is some fifty terms, not hundreds (0.44 s of a 167-spectrum search's 2.8 s on the GPU)."""
    k, n, p = (np.asarray(v).ravel() for v in (k, n, p))
    out = np.where(k <= 0, 0.0, np.where((k > n) | (p <= 0.0), LOG10_FLOOR, 0.0))
    go = np.flatnonzero((k > 0) & (k <= n) & (p > 0.0) & (p < 1.0))
    if go.size == 0:
        return out
    kk, nn, pp = k[go].astype(np.int64), n[go].astype(np.int64), p[go].astype(np.float64)
    lf = _log_factorials(int(nn.max()))
    spread = np.ceil(12.0 * np.sqrt(nn * pp * (1.0 - pp))).astype(np.int64) + 50
    last = np.minimum(nn, np.maximum(kk, np.floor(nn * pp).astype(np.int64)) + spread)
    row, i = ranges(kk, last + 1)
    logs = (lf[nn[row]] - lf[i] - lf[nn[row] - i]) + i * np.log(pp[row]) + (nn[row] - i) * np.log1p(-pp[row])
    first = np.cumsum(last - kk + 1) - (last - kk + 1)
    top = np.maximum.reduceat(logs, first)
    total = top + np.log(np.add.reduceat(np.exp(logs - top[row]), first))
    out[go] = np.clip(total / math.log(10), LOG10_FLOOR, 0.0)
    return out


_LOG_FACTORIALS = np.zeros(1)


def _log_factorials(n: int) -> np.ndarray:
    """``log(i!)`` for i = 0..n at least (a table grown as needed)."""
    global _LOG_FACTORIALS
    if _LOG_FACTORIALS.shape[0] <= n:
        size = max(n + 1, 2 * _LOG_FACTORIALS.shape[0])
        _LOG_FACTORIALS = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, size, dtype=np.float64)))])
    return _LOG_FACTORIALS


def chance(n_prm: int, residue_mass: float, tolerance: float) -> float:
    """Probability that a random mass lies within ``tolerance`` of one of ``n_prm`` PRMs over ``residue_mass``."""
    return float(chances(np.array([n_prm]), np.array([residue_mass]), np.array([tolerance]))[0])


def chances(n_prm: np.ndarray, residue_mass: np.ndarray, tolerance: np.ndarray) -> np.ndarray:
    """`chance` of each at once."""
    ok = (residue_mass > 0) & (n_prm > 0)
    return np.where(ok, -np.expm1(-2.0 * tolerance * n_prm / np.where(ok, residue_mass, 1.0)), 0.0)


def log10_evalue(score: int, shifts: int, n_prefix: int, n_prm: int, residue_mass: float, tolerance: float,
                 tests: float) -> float:  # fmt: skip
    """``log10`` of a PrSM's E-value (see the module docstring); ``n_prefix``: the proteoform's inner prefix
    masses (residues − 1), ``n_prm``: the spectrum's inner PRMs, ``tests``: its candidates (≥ 1)."""
    args = (score, shifts, n_prefix, n_prm, residue_mass, tolerance, tests)
    return float(log10_evalues(*(np.array([v]) for v in args))[0])


def log10_evalues(score: np.ndarray, shifts: np.ndarray, n_prefix: np.ndarray, n_prm: np.ndarray,
                  residue_mass: np.ndarray, tolerance: np.ndarray, tests: np.ndarray) -> np.ndarray:  # fmt: skip
    """`log10_evalue` of each PrSM at once (arrays of one length)."""
    p = chances(n_prm, residue_mass, tolerance)
    trials = np.maximum(n_prefix, 0) * (np.maximum(shifts, 0) + 1)
    return log10_binomial_tails(score, trials, p) + np.log10(np.maximum(tests, 1.0))
