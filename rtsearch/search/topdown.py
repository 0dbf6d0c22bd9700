"""Top-down search as a `SearchTarget`: a proteoform database, spectra aligned with unknown mass shifts.

Spectra arrive deconvoluted, as singly protonated ions (`rtsearch.types.DeconvolutedSpectrum.as_spectrum`:
msalign files, or the wire's charge-1 spectra). Each spectrum's PrSM comes from
`rtsearch.scoring.topdown.search.search_batch` (candidates, alignment on the backend, E-values); a match id
packs the proteoform — protein, first and last residue, N-terminal form — so two PrSMs of one proteoform share
it and ``peptide_q_value`` is the proteoform-level q-value (TopPIC's two levels: PrSM and proteoform).

A run is ranked by ``-log10`` E-value alone, not a discriminant fitted on the run: a top-down run has a few
hundred PrSMs, and a discriminant fitted on those learns its decoys away (issue 17's entrapment). The
``peptide`` column is ProForma 2.0 with one shift on the residues the spectrum allows (``SEQ(UEN)[+12.3456]CE``,
a known PTM by its name, `rtsearch.scoring.topdown.localize`), or of unknown position when it could be anywhere
(``[+79.966]?[Acetyl]-SEQ…``); ``proteoform_start``/``proteoform_end`` give its residues (1-based, inclusive)
in the protein, ``shift_first``/``shift_last`` the shift's (same numbering) and ``shift_score`` the probability
that it sits there (TopPIC's MIScore), ``mass_shift`` the shifts' sum in Da and ``evalue`` the E-value.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.config import BackendName, NTermForm, TopDownConfig, choices
from rtsearch.matches import BestMatches, Names, ScoredBatch
from rtsearch.proteoforms.database import ProteoformDatabase
from rtsearch.proteoforms.store import load_proteoforms
from rtsearch.scoring.backend import Backend, get_backend
from rtsearch.scoring.topdown.prm import WATER
from rtsearch.scoring.topdown.search import PrSM, search_batch
from rtsearch.scoring.topdown.truncation import Positions
from rtsearch.search import warmup
from rtsearch.search.lda import Discriminant
from rtsearch.search.target import Reopen, RunFit
from rtsearch.types import PROTON, DeconvolutedSpectrum, Precursor, Spectrum

FEATURES = ("neg_log10_evalue", "matched_prms", "unknown_shifts", "known_shifts", "mass_shift", "prms", "length",
            "shift_first", "shift_last", "shift_score")  # fmt: skip
RESULT_FIELDS = ("proteoform_start", "proteoform_end", "mass_shift", "unknown_shifts", "known_shifts", "shift_first",
                 "shift_last", "shift_score", "evalue")  # fmt: skip
_ACTIVATION = {"b/y": "CID", "c/z": "ETD"}
_BITS = 17  # a residue position in a match id (proteins up to 131,071 residues; `[proteoforms] max_length`)


def pack(protein: np.ndarray, start: np.ndarray, end: np.ndarray, form_kind: np.ndarray) -> np.ndarray:
    """Match ids of proteoforms: protein, residues [start, end), N-terminal form kind (-1: a truncation)."""
    p, a, b, f = (np.asarray(v, np.int64) for v in (protein, start, end, form_kind))
    return ((p << _BITS | a) << _BITS | b) << 3 | (f + 1)


def unpack(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(protein, start, end, form kind) of match ids (`pack`)."""
    ids = np.asarray(ids, np.int64)
    mask = (1 << _BITS) - 1
    return ids >> (3 + 2 * _BITS), (ids >> (3 + _BITS)) & mask, (ids >> 3) & mask, (ids & 7) - 1


class TopDownTarget:
    """A loaded `ProteoformDatabase` searched with ``cfg`` on one backend."""

    kind: str = "proteoforms"
    features: tuple[str, ...] = FEATURES
    primary: str = "neg_log10_evalue"
    learns: bool = False  # the E-value ranks the run
    result_fields: tuple[str, ...] = RESULT_FIELDS
    levels: tuple[str, str] = ("PrSMs", "proteoforms")

    def __init__(self, db: ProteoformDatabase, cfg: TopDownConfig, backend: Backend | None = None, *,
                 folder: str | Path | None = None) -> None:  # fmt: skip
        self.db, self.cfg = db, cfg
        self.backend = backend or get_backend("numpy")
        self.folder = folder
        self.positions = Positions(db, self.backend.xp) if cfg.truncations else None

    @classmethod
    def open(cls, folder: str | Path, cfg: TopDownConfig, backend: Backend | None = None) -> TopDownTarget:
        return cls(load_proteoforms(folder), cfg, backend, folder=folder)

    @property
    def entries(self) -> int:
        return len(self.db.accessions)

    @property
    def batch_limit(self) -> int | None:
        """One spectrum a batch on the CPU, where one takes seconds (issue 72: a run read as one batch showed no
        progress and kept Ctrl-C waiting for the whole file); on a GPU, batches as read."""
        return None if self.backend.is_gpu else 1

    def device_bytes(self) -> int:
        return int(self.positions.mass_host.nbytes) if self.positions is not None and self.backend.is_gpu else 0

    def score(self, spectra: SpectraBatch) -> ScoredBatch:
        activation = _ACTIVATION[self.cfg.ions]
        decon = [DeconvolutedSpectrum.of(sp, activation) for sp in spectra.spectra()]
        found = search_batch(self.db, decon, self.cfg, self.positions, xp=self.backend.xp)
        n = len(found)
        best = BestMatches.none(n, len(FEATURES))
        reason = [d.problem or ("" if r.protein >= 0 else "no candidate proteoform aligned") for d, r in
                  zip(decon, found, strict=True)]  # fmt: skip
        peptides, proteins = [""] * n, [list[str]() for _ in range(n)]
        hit = [i for i, r in enumerate(found) if r.protein >= 0]
        rs = [found[i] for i in hit]
        kinds = [int(self.db.form_kind[r.form]) if r.form >= 0 else -1 for r in rs]
        best.match[hit] = pack(np.array([r.protein for r in rs]), np.array([r.start for r in rs]),
                               np.array([r.end for r in rs]), np.array(kinds))  # fmt: skip
        for i, r, kind in zip(hit, rs, kinds, strict=True):
            mass = r.precursor_mass - r.mass_difference
            best.charge[i] = 1
            best.calc_mz[i] = mass + PROTON
            best.ppm_error[i] = (r.mass_difference / mass * 1e6) if not r.moved else np.nan
            best.matched_peaks[i] = r.score
            site = (r.site[0] + 1, r.site[1] + 1, r.site_score) if r.site[0] >= 0 else (np.nan, np.nan, np.nan)
            best.features[i] = (-r.log10_evalue, r.score, r.shifts, r.known, r.mass_difference, r.prms,
                                r.end - r.start, *site)  # fmt: skip
            peptides[i] = self._proforma(r, kind)
            proteins[i] = [self.db.accessions[r.protein]]
        return ScoredBatch(list(spectra.run), spectra.scan, spectra.precursor_mz, spectra.rt, best, reason,
                           names=Names(peptides, proteins), native_id=spectra.native_id)  # fmt: skip

    def _proforma(self, r: PrSM, kind: int) -> str:
        """ProForma 2.0 of a PrSM of N-terminal form ``kind``: a localized shift on its residue or range
        (``PR(OTE)[+79.9663]IN``, a known PTM by name), else of unknown position (``[+12.3456]?PROTEIN``)."""
        seq = self.db.sequence(r.protein)[r.start : r.end]
        acetyl = _n_term(kind)
        if not r.moved:
            return acetyl + seq
        label = f"[{r.shift_name or f'{r.mass_difference:+.4f}'}]"
        a, b = r.site[0] - r.start, r.site[1] - r.start
        if r.shifts + r.known > 1 or a < 0 or (a == 0 and b == len(seq) - 1):
            return f"[{r.mass_difference:+.4f}]?{acetyl}{seq}"
        if a == b:
            return f"{acetyl}{seq[: a + 1]}{label}{seq[a + 1 :]}"
        return f"{acetyl}{seq[:a]}({seq[a : b + 1]}){label}{seq[b + 1 :]}"

    def reopen(self, backend: BackendName = "numpy") -> Reopen | None:
        return Reopen(_open, (str(self.folder), self.cfg, backend)) if self.folder is not None else None

    def is_decoy(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(self.db.is_decoy[unpack(ids)[0]], dtype=bool)

    def peptides(self, ids: np.ndarray) -> list[str]:
        """The unshifted proteoforms of ``ids`` (a scored batch names its PrSMs with their shifts)."""
        protein, start, end, kind = unpack(ids)
        return [_n_term(f) + self.db.sequence(p)[a:b]
                for p, a, b, f in zip(protein.tolist(), start.tolist(), end.tolist(), kind.tolist(), strict=True)]

    def proteins(self, ids: np.ndarray) -> list[list[str]]:
        return [[self.db.accessions[p]] for p in unpack(ids)[0].tolist()]

    def peptide_keys(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(ids)  # one proteoform: protein, residues and N-terminal form

    def live_features(self, x: np.ndarray) -> np.ndarray:
        return x.copy()

    def fit_run(
        self, x: np.ndarray, decoy: np.ndarray, ids: np.ndarray, rt: np.ndarray, *, train: np.ndarray | None = None
    ) -> RunFit:
        """The E-value ranks the run (see the module docstring); nothing is fitted."""
        weights = np.zeros(len(FEATURES))
        weights[0] = 1.0
        disc = Discriminant(FEATURES, np.zeros(len(FEATURES)), np.ones(len(FEATURES)), weights)
        return RunFit(disc.score(np.nan_to_num(x)), disc, x)

    def extra_fields(self, ids: np.ndarray, features: np.ndarray) -> dict[str, np.ndarray]:
        _, start, end, _ = unpack(np.where(ids >= 0, ids, 0))
        f = {name: features[:, k] for k, name in enumerate(FEATURES)}
        return {"proteoform_start": np.where(ids >= 0, start + 1, 0), "proteoform_end": np.where(ids >= 0, end, 0),
                "mass_shift": f["mass_shift"], "unknown_shifts": np.nan_to_num(f["unknown_shifts"]).astype(np.int64),
                "known_shifts": np.nan_to_num(f["known_shifts"]).astype(np.int64),
                "shift_first": f["shift_first"], "shift_last": f["shift_last"], "shift_score": f["shift_score"],
                "evalue": 10.0 ** -f["neg_log10_evalue"]}  # fmt: skip

    def warm_up_spectra(self, n: int) -> list[Spectrum]:
        """``n`` spectra like real ones (20 of a 3–30 kDa form's N-terminal fragment masses and 10 noise masses, a
        deconvoluted run's ~40 PRMs: the daemon's engine-time model learns from these), and the odd ones (which
        top-down search answers as not deconvoluted)."""
        db = self.db
        rng = np.random.default_rng(0)
        usual = np.flatnonzero((db.form_mass > 3_000) & (db.form_mass < 30_000))
        if not usual.size:
            return warmup.placeholder()
        out = []
        for k, f in enumerate(rng.choice(usual, n).tolist()):
            prefix = db.form_prefix(f)
            inner = prefix[1:-1]
            picked = rng.choice(inner, min(20, inner.shape[0]), replace=False)
            mass = np.sort(np.concatenate([picked, rng.uniform(200, float(prefix[-1]), 10)]))
            d = DeconvolutedSpectrum(warmup.RUN, k, 2, mass, np.ones(mass.shape[0], np.float32),
                                     np.ones(mass.shape[0], np.int16), (Precursor(float(prefix[-1] + WATER)),))
            out.append(d.as_spectrum())
        return warmup.with_odd_ones(out, rng)


_ACETYLATED = frozenset(k for k, name in enumerate(choices(NTermForm)) if "acetyl" in name)


def _n_term(kind: int) -> str:
    """ProForma's N-terminal modification of a form of `NTermForm` index ``kind`` (-1: none)."""
    return "[Acetyl]-" if kind in _ACETYLATED else ""


def _open(folder: str, cfg: TopDownConfig, backend: BackendName) -> TopDownTarget:
    return TopDownTarget.open(folder, cfg, get_backend(backend))
