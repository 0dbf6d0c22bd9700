"""E-values of PrSMs: how often an alignment scores this well by chance, times the candidates a spectrum had.

A calibrated stand-in for TopPIC's generating-function E-values (Liu et al. 2012, "Protein identification
using top-down spectra", MCP 11:M111.008524), from a null model of chance coincidences:

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

LOG10_FLOOR = -300.0  # p-values below 1e-300 are reported as such


def log10_binomial_tail(k: int, n: int, p: float) -> float:
    """``log10 P(X >= k)`` for X ~ Binomial(n, p) (0 when k <= 0, the floor when k > n)."""
    if k <= 0:
        return 0.0
    if k > n or p <= 0.0:
        return LOG10_FLOOR
    if p >= 1.0:
        return 0.0
    lf = _log_factorials(n)
    i = np.arange(k, n + 1)
    logs = (lf[n] - lf[i] - lf[n - i]) + i * math.log(p) + (n - i) * math.log1p(-p)
    top = float(logs.max())
    total = top + math.log(float(np.exp(logs - top).sum()))
    return max(min(total / math.log(10), 0.0), LOG10_FLOOR)


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
    if residue_mass <= 0 or n_prm <= 0:
        return 0.0
    return -math.expm1(-2.0 * tolerance * n_prm / residue_mass)


def log10_evalue(score: int, shifts: int, n_prefix: int, n_prm: int, residue_mass: float, tolerance: float,
                 tests: float) -> float:  # fmt: skip
    """``log10`` of a PrSM's E-value (see the module docstring); ``n_prefix``: the proteoform's inner prefix
    masses (residues − 1), ``n_prm``: the spectrum's inner PRMs, ``tests``: its candidates (≥ 1)."""
    p = chance(n_prm, residue_mass, tolerance)
    trials = max(n_prefix, 0) * (max(shifts, 0) + 1)
    return log10_binomial_tail(score, trials, p) + math.log10(max(tests, 1.0))
