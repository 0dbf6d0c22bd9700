"""Top-down search: each spectrum's candidate proteoforms, aligned (on NumPy or CuPy); its best PrSM.

Candidates: the N-terminal forms whose mass is within ``max_shifts`` × ``max_shift_mass`` (plus the precursor
tolerance) of the precursor, ranked by the PRMs on their two diagonals — the N-terminal one (shift 0) and the
C-terminal one (the whole mass difference), which between them hold a path with one shift — the ``candidates``
best (a simple MS-Filter); with ``positions`` (`rtsearch.scoring.topdown.truncation.Positions`), also terminal
truncations of the precursor's mass and sub-sequences found by their diagonal counts. Each is aligned
(`rtsearch.scoring.topdown.align`) and given an E-value (`rtsearch.scoring.topdown.evalue`) over the spectrum's
candidates of its type, as TopPIC's are by proteoform type (`candidate_counts`): complete forms, terminal
truncations, internal ones. A spectrum's PrSM is its lowest E-value, then the highest score, fewest shifts,
smallest mass difference; with several precursors (one isolation window), the best over them. The chosen PrSM
(with at most one shift) is then given its generating-function E-value (`rtsearch.scoring.topdown.generating`,
TopPIC's kind: sharper than the binomial's, too costly for every candidate) and one shift is localized
(`rtsearch.scoring.topdown.localize`). The fragment tolerance is `TopDownConfig.tolerance` of the
precursor mass. Known PTMs (``[proteoforms] known_ptms``) are the alignment's known shifts, up to ``[topdown]
known_shifts`` a PrSM, counted apart from the unknown ones; the E-value counts both as shifts. A PrSM with one
shift, known or unknown, has it localized (and named when a known PTM fits).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rtsearch.config import TopDownConfig
from rtsearch.database.arrays import ranges
from rtsearch.proteoforms.database import ProteoformDatabase
from rtsearch.scoring.backend import compiled_kernel
from rtsearch.scoring.topdown.align import NONE
from rtsearch.scoring.topdown.evalue import log10_evalues
from rtsearch.scoring.topdown.generating import Question, Residues, log10_pvalues
from rtsearch.scoring.topdown.gpu import align_pairs
from rtsearch.scoring.topdown.kernels import FORM_DIAGONALS_SOURCE
from rtsearch.scoring.topdown.localize import localize
from rtsearch.scoring.topdown.prm import WATER, near, prm_masses
from rtsearch.scoring.topdown.truncation import ISOTOPE, Positions, lanes, terminals
from rtsearch.scoring.topdown.truncation import candidates as truncated
from rtsearch.types import DeconvolutedSpectrum


@dataclass(frozen=True)
class PrSM:
    """A spectrum's best proteoform-spectrum match (``protein`` -1: none): residues [start, end) of ``protein``,
    from N-terminal form ``form`` (its start and modification; cut short when ``end`` is not the protein's), or
    -1: a sub-sequence with no N-terminal modification."""

    scan: int
    protein: int
    start: int
    end: int
    form: int
    score: int
    shifts: int
    mass_difference: float  # precursor mass - the proteoform's mass (Da): the shifts' sum
    decoy: bool
    log10_evalue: float = 0.0
    precursor_mass: float = 0.0  # the neutral precursor mass it was aligned at
    prms: int = 0  # the spectrum's inner PRMs at that precursor
    site: tuple[int, int] = (-1, -1)  # with one shift: its first and last possible residue, 0-based in the protein
    site_score: float = float("nan")  # with one shift: the probability it sits in ``site`` (TopPIC's MIScore)
    shift_name: str = ""  # a known PTM of the shift's mass that a residue of ``site`` can carry
    known: int = 0  # known shifts (`[proteoforms] known_ptms`) the alignment used beside ``shifts`` unknown ones

    @property
    def moved(self) -> bool:
        """Whether the proteoform carries shifts (unknown or known): its mass is not the precursor's."""
        return self.shifts + self.known > 0


def window_of(precursor: float, s: TopDownConfig) -> float:
    """Da either side of ``precursor`` that a candidate's mass may lie: the shifts' range and the tolerance."""
    return s.max_shifts * s.max_shift_mass + precursor * s.precursor_ppm * 1e-6


def in_window(db: ProteoformDatabase, precursor: float, s: TopDownConfig) -> np.ndarray:
    """The forms whose mass is within `window_of` ``precursor``."""
    return np.flatnonzero(np.abs(db.form_mass - precursor) <= window_of(precursor, s))


def candidate_counts(db: ProteoformDatabase, s: TopDownConfig, precursor: float) -> dict[str, tuple[float, float]]:
    """How many candidates a spectrum at ``precursor`` has, for its E-values, as TopPIC counts them: by proteoform
    type — complete (N-terminal forms), terminal truncations (one end a protein's own), internal ones — and, for
    each, those of the precursor's mass (within its tolerance, isotope errors -1..1: what an alignment without
    shifts can be) and those within `window_of` it (with shifts). Truncations are estimated: from each start
    (internal) or protein end (terminal, two a protein), the ends within the range, 2 × range / mean residue mass."""
    n = int(db.residues.shape[0])
    k = db.offsets.shape[0] - 1
    mean = float(db.prefix[db.offsets[1:] + np.arange(k)].sum()) / n if n else 110.0
    tol = precursor * s.precursor_ppm * 1e-6
    exact = sum(int(np.sum(np.abs(db.form_mass - precursor - i * ISOTOPE) <= tol)) for i in (-1, 0, 1))
    near_, wide = 3 * 2.0 * tol / mean, 2.0 * window_of(precursor, s) / mean
    return {"complete": (float(exact), float(in_window(db, precursor, s).size)),
            "terminal": (2.0 * k * near_, 2.0 * k * wide), "internal": (n * near_, n * wide)}


def candidates(db: ProteoformDatabase, prm: np.ndarray, precursor: float, s: TopDownConfig) -> np.ndarray:
    """The forms to align against a spectrum's ``prm`` (see the module docstring), best first."""
    forms = in_window(db, precursor, s)
    if forms.size == 0:
        return forms
    scores = diagonal_counts(db, forms, prm, precursor - db.form_mass[forms], s.tolerance(precursor))
    order = np.lexsort((np.abs(db.form_mass[forms] - precursor), -scores))
    return forms[order[: s.candidates]]


def candidates_of(db: ProteoformDatabase, prms: Sequence[np.ndarray], precursors: np.ndarray, s: TopDownConfig,
                  xp: Any = np) -> list[np.ndarray]:  # fmt: skip
    """`candidates` of each (PRMs, precursor); on CuPy every (precursor, form in its window) pair's `diagonal_counts`
    in one launch (`kernels.FORM_DIAGONALS_SOURCE`, the same counts: tests/gpu/test_topdown_parity.py)."""
    if xp is np:
        return [candidates(db, prm, m, s) for prm, m in zip(prms, precursors.tolist(), strict=True)]
    windows = [in_window(db, m, s) for m in precursors.tolist()]
    forms = np.concatenate(windows) if windows else np.zeros(0, np.int64)
    if forms.size == 0:
        return windows
    sizes = [w.size for w in windows]
    of = np.repeat(np.arange(len(windows)), sizes)
    cut = np.cumsum(sizes)[:-1]
    k = db.form_protein[forms].astype(np.int64)
    base = db.offsets[k] + k + db.form_start[forms]
    last = db.offsets[k + 1] + k
    span = db.prefix[last] - db.prefix[base] + np.abs(db.form_delta[forms])
    lane = np.concatenate([lanes(v) for v in np.split(span, cut)])
    shift = precursors[of] - db.form_mass[forms]
    tol = np.array([s.tolerance(m) for m in precursors.tolist()])[of]
    flat = np.concatenate(prms).astype(np.float64)
    off = np.r_[0, np.cumsum([p.shape[0] for p in prms])].astype(np.int64)
    out = xp.zeros(forms.shape[0], dtype=xp.int32)
    fn = compiled_kernel(xp, FORM_DIAGONALS_SOURCE, "form_diagonals")
    args = [_resident(xp, db.prefix)] + [xp.asarray(v) for v in (base, last, db.form_delta[forms], lane, shift, tol,
                                                                   of.astype(np.int32), flat, off)]  # fmt: skip
    fn((forms.shape[0],), (128,), (*args, np.int32(forms.shape[0]), out))
    scores = xp.asnumpy(out).astype(np.int64)
    picked = []
    for j, (w, mine) in enumerate(zip(windows, np.split(scores, cut), strict=True)):
        order = np.lexsort((np.abs(db.form_mass[w] - precursors[j]), -mine))
        picked.append(w[order[: s.candidates]])
    return picked


_RESIDENT: dict[tuple[int, int], tuple[weakref.ref[np.ndarray], Any]] = {}


def _resident(xp: Any, a: np.ndarray) -> Any:
    """``a``'s copy on the current device, made once while ``a`` lives (the database's prefix masses, 11 MB for E.
    coli, not uploaded again for every batch of a daemon's)."""
    key = (int(xp.cuda.Device().id), id(a))
    held = _RESIDENT.get(key)
    if held is None or held[0]() is not a:
        for k in [k for k, (ref, _) in _RESIDENT.items() if ref() is None]:
            del _RESIDENT[k]
        held = _RESIDENT[key] = (weakref.ref(a), xp.asarray(a))
    return held[1]


def diagonal_counts(db: ProteoformDatabase, forms: np.ndarray, prm: np.ndarray, shift: np.ndarray,
                    tol: float) -> np.ndarray:  # fmt: skip
    """Per form: the inner PRMs within ``tol`` of one of its inner prefix masses (shift 0) or of one plus its
    ``shift`` (the whole mass difference). All forms at once: their prefix masses laid end to end
    (`rtsearch.scoring.topdown.truncation.lanes`), one sorted search of every (form, PRM)."""
    inner = prm[1:-1]
    if inner.size == 0 or forms.size == 0:
        return np.zeros(forms.shape[0], np.int64)
    k = db.form_protein[forms].astype(np.int64)
    base = db.offsets[k] + k + db.form_start[forms]  # the form's position 0 in ``db.prefix``
    last = db.offsets[k + 1] + k  # the protein's position n (not inner)
    row, at = ranges(base + 1, np.maximum(last, base + 1))
    lane = lanes(db.prefix[last] - db.prefix[base] + np.abs(db.form_delta[forms]))
    laid = db.prefix[at] - db.prefix[base[row]] + db.form_delta[forms][row] + lane[row]
    hit = near(laid, (inner[None, :] + lane[:, None]).ravel(), tol).reshape(forms.shape[0], -1)
    moved = near(laid, (inner[None, :] - shift[:, None] + lane[:, None]).ravel(), tol).reshape(forms.shape[0], -1)
    hit |= moved & (np.abs(shift) > tol)[:, None]
    return hit.sum(axis=1)


def search_spectrum(db: ProteoformDatabase, sp: DeconvolutedSpectrum, s: TopDownConfig,
                    positions: Positions | None = None, *, xp: Any = np) -> PrSM:  # fmt: skip
    """The best PrSM of one spectrum (`search_batch` of one)."""
    return search_batch(db, [sp], s, positions, xp=xp)[0]


def search_batch(db: ProteoformDatabase, spectra: Sequence[DeconvolutedSpectrum], s: TopDownConfig,
                 positions: Positions | None = None, *, xp: Any = np) -> list[PrSM]:  # fmt: skip
    """Each spectrum's best PrSM over its precursors and their candidates: whole N-terminal forms and, with
    ``positions``, truncated sub-sequences (`rtsearch.scoring.topdown.truncation`); protein -1 when none aligns
    (or the spectrum has a ``problem``). Every pair of the batch is aligned in one `align_pairs` call on ``xp``."""
    prms: list[np.ndarray] = []
    owner: list[tuple[int, float]] = []  # each PRM array's spectrum and precursor mass
    for i, sp in enumerate(spectra):
        if not sp.problem:
            for p in sp.precursors:
                prms.append(prm_masses(sp.mass, p.mass, sp.activation, merge_within=s.tolerance(p.mass)))
                owner.append((i, p.mass))
    looks: list[_Look] = []
    for j, ((i, mass), opts) in enumerate(zip(owner, _options(db, prms, owner, s, positions, xp), strict=True)):
        counts = candidate_counts(db, s, mass)
        for opt in opts:
            k, a, b, f = opt[:4]
            whole = b == int(db.offsets[k + 1] - db.offsets[k])
            kind = "complete" if f >= 0 and whole else "terminal" if f >= 0 or a <= 1 or whole else "internal"
            looks.append(_Look(i, j, mass, counts[kind], *opt))
    found = [PrSM(sp.scan, -1, 0, 0, -1, NONE, -1, 0.0, False) for sp in spectra]
    if not looks:
        return found
    tol = np.array([s.tolerance(o.precursor) for o in looks])
    known = db.known.mass if s.known_shifts else np.zeros(0)
    fc = s.known_shifts + 1 if known.size else 1  # the alignment's layers: (unknown, known) shift counts
    scores = align_pairs(prms, [o.prefix for o in looks], np.array([(o.prm, k) for k, o in enumerate(looks)]),
                         tolerance=tol, max_shifts=s.max_shifts, max_shift_mass=s.max_shift_mass,
                         precursor_tolerance=np.array([o.precursor * s.precursor_ppm * 1e-6 for o in looks]),
                         known=known, max_known=fc - 1, known_reach=(fc - 1) * float(np.abs(known).max(initial=0)),
                         xp=xp)  # fmt: skip
    evalues = _evalues(scores, fc, looks, prms, tol)
    layer = np.argmin(evalues, axis=1)  # the alignment with at most these shifts least likely by chance
    score, e = scores[np.arange(len(looks)), layer], evalues[np.arange(len(looks)), layer]
    best: list[tuple[float, ...]] = [(-np.inf,)] * len(spectra)
    chosen: dict[int, _Look] = {}
    for o, v, f, ev in zip(looks, score.tolist(), layer.tolist(), e.tolist(), strict=True):
        if v <= NONE:
            continue
        mass = float(o.prefix[-1] + WATER)
        u, c = divmod(f, fc)
        key = (-ev, v, -(u + c), -abs(o.precursor - mass))
        if key > best[o.spectrum]:
            best[o.spectrum] = key
            chosen[o.spectrum] = o
            found[o.spectrum] = PrSM(spectra[o.spectrum].scan, o.protein, o.start, o.end, o.form, v, u,
                                     o.precursor - mass, bool(db.is_decoy[o.protein]), ev, o.precursor,
                                     len(prms[o.prm]) - 2, known=c)  # fmt: skip
    _exact_evalues(db, found, chosen, prms, s, xp)
    for i, o in chosen.items():
        r = found[i]
        if r.shifts + r.known == 1:  # one shift, unknown or known: localized, named when a known PTM fits
            codes = db.residues[db.offsets[o.protein] + o.start : db.offsets[o.protein] + o.end]
            at = localize(o.prefix, prms[o.prm], r.mass_difference, s.tolerance(o.precursor), codes, db.known)
            found[i] = replace(r, site=(o.start + at.first, o.start + at.last), site_score=at.score,
                               shift_name=at.name)  # fmt: skip
    return found


def _exact_evalues(db: ProteoformDatabase, found: list[PrSM], chosen: dict[int, _Look], prms: Sequence[np.ndarray],
                   s: TopDownConfig, xp: Any) -> None:  # fmt: skip
    """Each chosen PrSM with at most one shift given its generating-function E-value
    (`rtsearch.scoring.topdown.generating`) in place of the binomial one it was chosen by, all on ``xp`` at once."""
    picked, questions = [], []
    for i, o in chosen.items():
        r = found[i]
        if r.shifts + r.known > 1:
            continue
        inner = prms[o.prm][1:-1]
        tol = s.tolerance(o.precursor)
        marks = np.concatenate([inner, inner - r.mass_difference]) if r.moved else inner
        start = float(db.form_delta[o.form]) if o.form >= 0 else 0.0
        end = max(tol, o.precursor * s.precursor_ppm * 1e-6)
        questions.append(Question(marks, tol, float(o.prefix[-1]), end, start, r.score))
        picked.append(i)
    if not questions:
        return
    p = log10_pvalues(questions, Residues(*db.composition), xp=xp)
    for i, v in zip(picked, p.tolist(), strict=True):
        r, o = found[i], chosen[i]
        found[i] = replace(r, log10_evalue=v + float(np.log10(max(o.tests[min(r.shifts + r.known, 1)], 1.0))))


def _evalues(scores: np.ndarray, fc: int, looks: Sequence[_Look], prms: Sequence[np.ndarray],
             tol: np.ndarray) -> np.ndarray:  # fmt: skip
    """log10 E-values [looks, layers] of the alignments' scores (inf where none); layer u × ``fc`` + c: at most u
    unknown and c known shifts, u + c + 1 diagonals. A score no higher than with one shift fewer has more trials
    and candidates, so a larger E-value: not computed."""
    out = np.full(scores.shape, np.inf)
    u, c = np.divmod(np.arange(scores.shape[1]), fc)
    higher = np.ones(scores.shape, bool)
    higher[:, u > 0] &= scores[:, u > 0] > scores[:, np.flatnonzero(u > 0) - fc]
    higher[:, c > 0] &= scores[:, c > 0] > scores[:, np.flatnonzero(c > 0) - 1]
    row, f = np.nonzero((scores > NONE) & higher)
    if row.size == 0:
        return out
    n_prm = np.array([len(prms[o.prm]) - 2 for o in looks])[row]
    residues = np.array([prms[o.prm][-1] for o in looks], np.float64)[row]
    n_prefix = np.array([len(o.prefix) - 2 for o in looks])[row]
    shifts = u[f] + c[f]
    tests = np.array([o.tests for o in looks], np.float64).reshape(-1, 2)[row, np.minimum(shifts, 1)]
    out[row, f] = log10_evalues(scores[row, f], shifts, n_prefix, n_prm, residues, tol[row], tests)
    return out


@dataclass(frozen=True, slots=True)
class _Look:
    """One candidate of one spectrum's precursor, to align."""

    spectrum: int
    prm: int  # which PRM array
    precursor: float
    tests: tuple[float, float]  # its type's candidates without shifts, and with
    protein: int
    start: int
    end: int
    form: int
    prefix: np.ndarray


def _options(db: ProteoformDatabase, prms: Sequence[np.ndarray], owner: Sequence[tuple[int, float]],
             s: TopDownConfig, positions: Positions | None,
             xp: Any) -> list[list[tuple[int, int, int, int, np.ndarray]]]:  # fmt: skip
    """Per precursor, (protein, start, end, form, prefix masses) of its candidates: whole forms, then truncations;
    the whole forms' and the terminal truncations' searches of all precursors at once."""
    mass = np.array([m for _, m in owner], np.float64)
    whole = candidates_of(db, prms, mass, s, xp)
    pos = positions if s.truncations else None
    ends = terminals(db, pos, mass - WATER, mass * s.precursor_ppm * 1e-6) if pos is not None else []
    out = []
    for j, (prm, precursor) in enumerate(zip(prms, mass.tolist(), strict=True)):
        opts = []
        for f in whole[j].tolist():
            k = int(db.form_protein[f])
            opts.append((k, int(db.form_start[f]), int(db.offsets[k + 1] - db.offsets[k]), f, db.form_prefix(f)))
        if pos is not None:
            for k, a, b, f in ends[j]:
                prefix = db.prefix_of(k)[a : b + 1] - db.prefix_of(k)[a]
                if f >= 0:
                    prefix[1:] += db.form_delta[f]
                opts.append((k, a, b, f, prefix))
            for k, a, b in truncated(pos, prm, precursor - WATER, tol=s.tolerance(precursor),
                                     window=window_of(precursor, s), limit=s.candidates * 10):  # fmt: skip
                full = db.prefix_of(k)
                opts.append((k, a, b, -1, full[a : b + 1] - full[a]))
        out.append(opts)
    return out
