"""A run's discriminant fitted on some of its spectra and applied to the others: no PSM is scored by a fit it trained.

A discriminant fitted on the PSMs it then scores learns the run's noise too. On a run with no true match (iPRG 2013
F13, human, against the E. coli index: 259 targets, 242 decoys) the in-sample fit put 7 targets above every decoy;
on 300 spectra drawn from BSA1 against its database and a 1:1 shuffled entrapment it accepted 21 at 5 % FDR, 3 of
them entrapment (an estimated FDP of 29 %). As Percolator (Granholm et al. 2012, BMC Bioinformatics 13 Suppl
16:S3) and mokapot do, the run's spectra are split into `FOLDS` folds; each fold is scored by the target's
`SearchTarget.fit_run` trained on the other folds (calibrations included), and a spectrum's lower-ranked PSMs
follow its fold. Each fold's scores are then put on one scale by its decoys, which stand for the null in every fold
alike: minus their median, over their spread (1.4826 × MAD), so one fold's fit cannot rank its noise above
another's. Cross-fitted, F13 against E. coli has no target above the first decoy, and the 300 spectra accept 0 at
5 %; whole BSA1 (1,120 spectra) accepts 59 at 5 % with no entrapment (61 with 2 in-sample).

Below `MIN_SPECTRA` best matches the run is fitted in-sample, once: on the development runs of 118–150 spectra,
half of them identified, cross-fitting lost 20–65 % of the PSMs that decoys / targets accepts at 1 %, where the
in-sample fit let in no entrapment. At 200 spectra of BSA1 the in-sample fit let one entrapment PSM into 9 at
decoys / targets 1 %, but the reported (decoys + 1) / targets accepts none at 5 %; at 300 it accepts 3 of 21.
(Measured with ``rtsearch search`` on NumPy, `tests/entrapment.py`'s counts, 2026-12-07.) A kind whose run score
is not fitted (``learns`` false: top-down's E-value) is scored once, as it is.
"""

from __future__ import annotations

import numpy as np

from rtsearch.search.target import RunFit, SearchTarget

FOLDS = 3
SEED = 1  # the fold of each spectrum: a fixed shuffle, so the same run gives the same scores
MIN_SPECTRA = 200  # best matches (targets and decoys) from which a run is cross-fitted


def folds_of(n: int, folds: int = FOLDS, seed: int = SEED) -> np.ndarray:
    """The fold (0 … ``folds`` − 1) of each of ``n`` spectra: sizes within one, a seeded shuffle."""
    fold = np.arange(n) % folds
    np.random.default_rng(seed).shuffle(fold)
    return fold


def on_decoy_scale(score: np.ndarray, null: np.ndarray) -> np.ndarray:
    """``score`` minus the median of ``null`` (its decoys' scores), over their spread (1.4826 × MAD; 1 where it is 0
    or there are none)."""
    null = null[np.isfinite(null)]
    if null.size == 0:
        return score
    centre = float(np.median(null))
    spread = 1.4826 * float(np.median(np.abs(null - centre)))
    return (score - centre) / (spread if spread > 0 else 1.0)


def cross_fit(
    target: SearchTarget, x: np.ndarray, decoy: np.ndarray, ids: np.ndarray, rt: np.ndarray, *,
    best: int, of_best: np.ndarray, place: np.ndarray,
) -> RunFit:
    """The run's PSMs scored fold by fold (see the module docstring): ``x`` [N, F] and the other arrays hold its
    ``best`` best matches (one a spectrum), then its lower-ranked PSMs, the ``i``-th of them of best match
    ``of_best[i]``. ``place``: each best match's place in an order of the run's spectra that does not depend on
    the order they were answered in (a cluster's workers answer in another than one engine's), which gives its fold.

    Each PSM's score and reported features come from the fit that scored it; ``discriminant`` is the first
    fold's."""
    train_best = np.arange(x.shape[0]) < best
    if best < MIN_SPECTRA or not target.learns:
        return target.fit_run(x, decoy, ids, rt, train=train_best)
    spectrum_fold = folds_of(best)[place]
    fold = np.r_[spectrum_fold, spectrum_fold[of_best]]
    score = np.full(x.shape[0], np.nan)
    features = np.array(x, dtype=float, copy=True)
    first: RunFit | None = None
    for k in range(FOLDS):
        mine = fold == k
        fitted = target.fit_run(x, decoy, ids, rt, train=train_best & ~mine)
        first = first or fitted
        score[mine] = on_decoy_scale(fitted.score[mine], fitted.score[mine & train_best & decoy])
        features[mine] = fitted.features[mine]
    assert first is not None
    return RunFit(score, first.discriminant, features)
