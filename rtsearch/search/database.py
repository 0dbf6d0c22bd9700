"""Database search as a `SearchTarget`: a peptide index scored by `Engine`, calibrated per run.

Matches are peptides of the index (ids: their rank by mass). A run's discriminant
is fitted twice (Percolator-style, `rtsearch.search.lda`): first on uncalibrated
features (|ppm| for the precursor error), then, on that fit's confident targets,
the precursor error becomes a z-score against the run's own offset and spread
(`recenter_ppm`), the retention time is predicted from composition
(`rtsearch.scoring.database.retention`), the PSMs that fit accepts give each PSM
its sibling evidence (`rtsearch.scoring.database.siblings`), and the discriminant
is fitted again.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.config import BackendName, DatabaseConfig, SearchConfig
from rtsearch.database.index import PeptideIndex
from rtsearch.database.store import load_index
from rtsearch.matches import ScoredBatch
from rtsearch.scoring.backend import Backend, get_backend
from rtsearch.scoring.database.engine import Engine
from rtsearch.scoring.database.features import FEATURES
from rtsearch.scoring.database.partial import QueryScores
from rtsearch.scoring.database.retention import rt_error
from rtsearch.scoring.database.siblings import sibling_evidence
from rtsearch.search import warmup
from rtsearch.search.fdr import confident, q_values
from rtsearch.search.lda import fit
from rtsearch.search.live import named
from rtsearch.search.target import Reopen, RunFit
from rtsearch.types import C13_DELTA, PROTON, Spectrum

_Z2, _SIGNED, _RT, _SIB = (FEATURES.index(f) for f in ("ppm_error_z2", "signed_ppm_error", "rt_error", "siblings"))
# the discriminant's shrinkage (`rtsearch.search.lda.fit`, 1e-3 there): with `siblings`, 0.1 held the dev runs' 1:1
# entrapment to 0 matches in 273 accepted (docs/history/RESULTS.md, 2026-11-28: 0.001-0.3 measured)
RIDGE = 0.1

log = logging.getLogger(__name__)


def recenter_ppm(x: np.ndarray, good: np.ndarray) -> None:
    """Express the precursor error of PSMs ``x`` against the run's own offset and spread, in place.

    Offset and spread (median, 1.4826·MAD, at least 0.5 ppm) come from the confident
    targets ``good``: a calibration, since instruments drift by a few ppm. The
    ``ppm_error_z2`` feature becomes the squared z-score of the error (capped at 25): the
    log-likelihood ratio of a Gaussian error for a right match against a uniform one for
    a random match, up to a constant.
    """
    signed = x[:, _SIGNED]
    offset = float(np.median(signed[good])) if good.any() else 0.0
    spread = 1.4826 * float(np.median(np.abs(signed[good] - offset))) if good.any() else 1.0
    spread = max(spread, 0.5)
    x[:, _Z2] = np.minimum(((signed - offset) / spread) ** 2, 25.0)


class DatabaseTarget:
    """A loaded `PeptideIndex` searched with `SearchConfig` ``cfg`` on one backend."""

    kind: str = "index"
    features: tuple[str, ...] = FEATURES
    result_fields: tuple[str, ...] = ()
    levels: tuple[str, str] = ("PSMs", "peptides")
    learns: bool = True
    batch_limit: int | None = None  # offline batches as read (`SearchTarget.batch_limit`)
    ridge: float = RIDGE  # the run's discriminants' shrinkage, at the run's end and live (rtsearch.search.live)

    def __init__(
        self, index: PeptideIndex, cfg: SearchConfig, backend: Backend | None = None, *, engine: Engine | None = None
    ) -> None:
        """``engine``: one built already (benchmarks pass one with other options), else `Engine` of the rest."""
        self.index = index
        self.cfg = cfg
        self.primary: str = cfg.score
        self.engine = engine or Engine(index, cfg, backend)
        self.backend = self.engine.backend

    @classmethod
    def open(
        cls, folder: str | Path, cfg: SearchConfig, backend: Backend | None = None, *,
        expect: DatabaseConfig | None = None,
    ) -> DatabaseTarget:  # fmt: skip
        """The index in ``folder`` (checked against ``expect`` when given), memory-mapped."""
        index = load_index(folder, expect=expect)
        log.debug("index %s mapped: %d peptides", folder, len(index.mass))
        return cls(index, cfg, backend)

    @property
    def entries(self) -> int:
        return self.engine.entries

    def device_bytes(self) -> int:
        return self.engine.device_bytes()

    def score(self, spectra: SpectraBatch) -> ScoredBatch:
        """Each spectrum's best match; a slice's (a partition worker's, `reopen_slice`) named from its own peptides,
        then numbered as the whole target numbers them."""
        scored = self.engine.score(spectra)
        first = self.engine.first
        if not first:
            return scored
        scored = named(self, scored)
        for best in (scored.best, *scored.lower):
            best.match = np.where(best.match >= 0, best.match + first, best.match)
        return scored

    def reopen(self, backend: BackendName = "numpy") -> Reopen | None:
        folder = self.index.folder
        return Reopen(_open, (str(folder), self.cfg, backend)) if folder is not None else None

    def is_decoy(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(self.index.is_decoy(ids), dtype=bool)

    # ------------------------------------------------------------ a cluster cut by mass (rtsearch/cluster/)

    def query_masses(self, spectra: SpectraBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each (spectrum, charge) query's spectrum row, neutral mass and candidate peptides (its precursor
        windows' span: the work it costs), as `Engine.score_queries` makes them."""
        q = self.engine.queries(spectra, np.ones(len(spectra), dtype=bool))
        return q.spectrum, q.mass, q.hi - q.lo

    def score_queries(self, spectra: SpectraBatch, own: tuple[float, float]) -> QueryScores:
        """The queries of neutral mass in [own[0], own[1]) scored (`Engine.score_queries`)."""
        return self.engine.score_queries(spectra, own=own)

    def best_of(self, spectra: SpectraBatch, scored: QueryScores) -> ScoredBatch:
        """Each spectrum's best over queries scored by workers (`rtsearch.scoring.database.partial.merge`)."""
        return self.engine.best_of(spectra, scored)

    def slice_sizes(self) -> tuple[np.ndarray, int]:
        """Bytes a device holds of this target: per peptide (its fragments and form: what a mass slice cuts), and
        what every slice holds whole (the base peptides' residues)."""
        i = self.index
        f = i.forms
        per_form = f.base.itemsize + f.mass.itemsize + f.mod_pos[:1].nbytes + f.mod_id[:1].nbytes
        per_fragment = i.fragments.mz.itemsize + i.fragments.peptide.itemsize
        fragments = np.bincount(np.asarray(i.fragments.peptide), minlength=len(f))
        return fragments * per_fragment + per_form, int(i.bases.residues.nbytes + i.bases.offsets.nbytes)

    def reopen_slice(self, own: tuple[float, float], backend: BackendName) -> Reopen:
        """Open, elsewhere, the peptides that queries of neutral mass in [own[0], own[1]) can match (their
        precursor windows, isotope errors included) — a partition worker's share of the target."""
        folder = self.index.folder
        if folder is None:
            raise ValueError("a slice is opened from the index's folder")
        lo, hi = own
        lo_da = lo - self.reach_da(lo)[0] if np.isfinite(lo) else -np.inf
        hi_da = hi + self.reach_da(hi)[1] if np.isfinite(hi) else np.inf
        return Reopen(_open_slice, (str(folder), self.cfg, backend, lo_da, hi_da))

    def reach_da(self, mass: float) -> tuple[float, float]:
        """How far below and above ``mass`` (Da) a query of that mass finds candidates: its precursor window,
        isotope errors included (what a slice holds beyond the masses it serves, `reopen_slice`)."""
        c = self.cfg
        width = float(c.precursor_tolerance.width(mass)) + 1e-6
        return (max(max(c.isotope_errors), 0) * C13_DELTA + width, max(-min(c.isotope_errors), 0) * C13_DELTA + width)

    def peptides(self, ids: np.ndarray) -> list[str]:
        return self.index.proformas(ids)

    def proteins(self, ids: np.ndarray) -> list[list[str]]:
        return self.index.accessions(ids)

    def peptide_keys(self, ids: np.ndarray) -> np.ndarray:
        return ids  # a peptide of the index is one modified form

    def live_features(self, x: np.ndarray) -> np.ndarray:
        """|ppm| for the precursor error: the run's calibration exists only at its end."""
        out = x.copy()
        out[:, _Z2] = np.abs(out[:, _SIGNED])
        return out

    def fit_run(
        self, x: np.ndarray, decoy: np.ndarray, ids: np.ndarray, rt: np.ndarray, *, train: np.ndarray | None = None
    ) -> RunFit:
        """Fit on uncalibrated features, calibrate mass and retention time on its confident targets, fit again;
        fitted on the rows ``train``, every row calibrated and scored."""
        x = self.live_features(x)
        rows = np.ones(len(x), bool) if train is None else train
        disc = fit(x[rows], decoy[rows], FEATURES, start=self.primary, ridge=RIDGE)
        first = disc.score(x[rows])
        good = np.zeros(len(x), bool)
        good[rows] = confident(first, decoy[rows])
        likely = np.zeros(len(x), bool)  # targets and decoys alike: `siblings`
        likely[rows] = q_values(first, decoy[rows], plus_one=False) <= 0.01
        recenter_ppm(x, good)
        x[:, _RT] = rt_error(self.index, ids, rt, good)
        x[:, _SIB] = sibling_evidence(self.index, ids, likely)
        # the features not calibrated rank the rows as before: their counts reused (the same choice, fewer sorts)
        known = [None if j in (_Z2, _RT, _SIB) else c for j, c in enumerate(disc.ranked or [None] * len(FEATURES))]
        disc = fit(x[rows], decoy[rows], FEATURES, start=self.primary, ridge=RIDGE, known=known)
        score = np.empty(len(x))
        score[rows] = disc.score(x[rows])  # apart: the same sums, to the last bit, as with no other rows
        score[~rows] = disc.score(x[~rows])
        return RunFit(score, disc, x)

    def extra_fields(self, ids: np.ndarray, features: np.ndarray) -> dict[str, np.ndarray]:
        return {}

    def warm_up_spectra(self, n: int) -> list[Spectrum]:
        """``n`` spectra made of index peptides' own fragment m/z (plus seeded noise), charges varied."""
        rng = np.random.default_rng(0)
        masses = self.engine.peptide_mass
        if not len(masses):
            return warmup.placeholder()
        chosen = np.unique(rng.integers(0, len(masses), n))
        pick = np.zeros(len(masses), dtype=bool)
        pick[chosen] = True
        frags = self.index.fragments
        hit = np.flatnonzero(pick[frags.peptide])
        by_pep: dict[int, list[float]] = {}
        for p, mz in zip(frags.peptide[hit].tolist(), frags.mz[hit].tolist(), strict=True):
            by_pep.setdefault(p, []).append(mz)
        charges: tuple[tuple[int, ...], ...] = ((2,), (), (2, 3), (3,))
        out = []
        for k, p in enumerate(chosen.tolist()):
            mz = np.sort(np.concatenate([np.asarray(by_pep.get(p, []), np.float64), rng.uniform(150, 1500, 40)]))
            inten = np.asarray(rng.uniform(10, 100, mz.shape[0]), dtype=np.float32)
            z = charges[k % len(charges)]
            prec = (float(masses[p]) + (z[0] if z else 2) * PROTON) / (z[0] if z else 2)
            out.append(Spectrum(warmup.RUN, k, 2, mz, inten, prec, z))
        return warmup.with_odd_ones(out, rng)


def _open(folder: str, cfg: SearchConfig, backend: BackendName) -> DatabaseTarget:
    return DatabaseTarget.open(folder, cfg, get_backend(backend))


def _open_slice(folder: str, cfg: SearchConfig, backend: BackendName, lo_da: float, hi_da: float) -> DatabaseTarget:
    be = get_backend(backend)
    index, first = load_index(folder).slice(lo_da, hi_da, be.xp)
    return DatabaseTarget(index, cfg, engine=Engine(index, cfg, be, first=first))
