"""A lone spectrum's best match and its features, in Python scalars: the daemon's one-spectrum batches.

At instrument rates (a few hundred spectra a second) the daemon scores spectra one at a time, and
`rtsearch.scoring.database.features.best_matches` — written for batches, ~40 NumPy calls on arrays of
one row — cost a lone spectrum more than its whole GPU work: 360–546 µs on the development machine
against 94–110 µs here (300 bench spectra scored alone, best of five), and more on the GPU hosts, whose
code runs several times slower when it ran a few milliseconds ago (docs/history/RESULTS.md, 2026-11-29: the
engine alone on a batch of one 1.31 → 0.73 ms on an H200 host with this module). It makes the same
choice and computes the same features for one spectrum's queries, its ``[Q, k]`` candidates read as
Python lists. It is not a second definition: `best_one` must equal `best_matches` for
``n_spectra = 1, ranks = 1`` bit for bit — the same match, charge and counts, the same floats (the
sums of scores taken as NumPy takes them; ``tests/unit/test_lone_choice.py``, every spectrum of the
bundled E. coli run alone).

Choice (as `features._choose`): the best finite score over every (query, candidate); among its ties
the lowest peptide index, then the earliest query, then the earliest column. Against it: the next
best entry of another peptide (``delta_score``) and the others' mean and spread (``score_z``).
"""

from __future__ import annotations

import math

import numpy as np

from rtsearch.database.index import PeptideIndex
from rtsearch.matches import BestMatches
from rtsearch.scoring.database.candidates import Queries
from rtsearch.scoring.database.features import FEATURES, poisson_evidence
from rtsearch.scoring.database.matching import MatchStats
from rtsearch.types import C13_DELTA, PROTON, Tolerance

_AT = {name: j for j, name in enumerate(FEATURES)}
_NONE = int(np.iinfo(np.int64).max)


def best_one(
    index: PeptideIndex,
    queries: Queries,
    cand: np.ndarray,
    prelim: np.ndarray,
    stats: MatchStats,
    *,
    primary: str,
    precursor_tolerance: Tolerance,
    isotope_errors: tuple[int, ...],
    match_probability: np.ndarray,
    max_fragment_charge: int,
) -> BestMatches:
    """`rtsearch.scoring.database.features.best_matches` of one spectrum (every query its own, host arrays),
    rank 1 only; see the module docstring."""
    out = BestMatches(np.full(1, -1, np.int64), np.zeros(1, np.int64), np.full(1, np.nan), np.full(1, np.nan),
                      np.zeros(1, np.int64), np.zeros((1, len(FEATURES))))  # fmt: skip
    if len(queries) == 0:
        return out
    chosen = _choose(cand, np.asarray(getattr(stats, primary), dtype=np.float64))
    if chosen is None:
        return out
    bq, bk, bp, _, delta, score_z = chosen
    z = int(queries.charge[bq])
    mass = float(queries.mass[bq])
    pmass = float(index.mass[bp])
    width = float(precursor_tolerance.width(mass))
    iso = 0
    for e in sorted(isotope_errors, key=abs, reverse=True):  # the smallest error whose window holds it
        if abs(mass - e * C13_DELTA - pmass) <= width:
            iso = e
    err = (mass - iso * C13_DELTA - pmass) / pmass * 1e6
    base = int(index.forms.base[bp])
    length = float(index.bases.offsets[base + 1] - index.bases.offsets[base])
    got = {name: float(getattr(stats, name)[bq, bk]) for name in MatchStats.__dataclass_fields__}
    n_b, n_y = got["n_b"], got["n_y"]
    mods = index.forms.mod_pos
    n_var = int(np.count_nonzero(mods[bp] >= 0)) if mods.shape[1] else 0
    expected = 2 * (length - 1) * min(max(z - 1, 1), max_fragment_charge) * float(match_probability[0])
    row = out.features[0]
    for name, value in (
        ("hyperscore", got["hyperscore"]), ("dot", got["dot"]), ("xcorr", got["xcorr"]), ("delta_score", delta),
        ("score_z", score_z), ("matched_ions", n_b + n_y), ("matched_b", n_b), ("matched_y", n_y),
        ("ion_fraction", (n_b + n_y) / max(2 * (length - 1), 1)), ("matched_peaks", got["matched_peaks"]),
        ("explained_intensity", got["explained"]), ("longest_run", got["longest_run"]),
        ("frag_error", got["frag_error"]), ("ppm_error_z2", abs(err)), ("signed_ppm_error", err),
        ("isotope_error", iso), ("charge", z), ("length", length),
        ("missed_cleavages", float(index.base_missed_cleavages[base])), ("variable_mods", n_var),
        ("prelim_count", float(prelim[bq, bk])),
        ("log_candidates", float(np.log1p(queries.hi[bq] - queries.lo[bq]))),
        ("poisson", float(poisson_evidence(np.array([int(n_b + n_y)]), np.array([expected]))[0])),
    ):  # fmt: skip
        row[_AT[name]] = value  # rt_error and siblings stay 0: filled per run (rtsearch.search.table)
    out.match[0], out.charge[0], out.calc_mz[0], out.ppm_error[0] = bp, z, pmass / z + PROTON, err
    out.matched_peaks[0] = int(got["matched_peaks"])
    return out


def _choose(cand: np.ndarray, primary: np.ndarray) -> tuple[int, int, int, float, float, float] | None:
    """The best (query, column, peptide, score) of one spectrum's ``[Q, k]`` candidates (-1: none) and scores, with
    its ``delta_score`` and ``score_z``; ``None`` when no finite best (NaN anywhere: none, as NumPy's max gives)."""
    peps_l, scores_l = cand.tolist(), primary.tolist()
    top = -math.inf
    for peps, scores in zip(peps_l, scores_l, strict=True):
        for p, s in zip(peps, scores, strict=True):
            if p >= 0:
                if s != s:  # NaN: NumPy's maxima propagate it, and the spectrum has no match
                    return None
                if s > top:
                    top = s
    if not math.isfinite(top):
        return None
    bq = bk = -1
    bp = _NONE
    next_s, n_in = -math.inf, 0
    for q, (peps, scores) in enumerate(zip(peps_l, scores_l, strict=True)):
        for k, (p, s) in enumerate(zip(peps, scores, strict=True)):
            if p >= 0 and s == top and p < bp:
                bq, bk, bp = q, k, p
    for peps, scores in zip(peps_l, scores_l, strict=True):
        for p, s in zip(peps, scores, strict=True):
            if p >= 0 and math.isfinite(s):
                n_in += 1
                if p != bp and s > next_s:
                    next_s = s
    # the sums as the batch path reduces them (a row's, then the rows'), so that they round alike
    s0 = np.where((cand >= 0) & np.isfinite(primary), primary, 0.0)
    sum_all, sq_all = float(s0.sum(axis=1).sum()), float((s0 * s0).sum(axis=1).sum())
    delta = top - next_s if math.isfinite(next_s) else top
    n_o = max(n_in - 1, 1)
    mean_o = (sum_all - top) / n_o
    var_o = max((sq_all - top * top) / n_o - mean_o * mean_o, 0.0)
    score_z = (top - mean_o) / math.sqrt(var_o + 1e-6) if n_in > 2 else 0.0
    return bq, bk, int(bp), top, delta, score_z
