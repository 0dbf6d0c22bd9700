"""The alignment kernel (`rtsearch.scoring.topdown.gpu`) gives the NumPy reference's scores, pair for pair: random
small grids (as tests/unit/test_topdown_align.py's) and the FLASHApp E. coli run's spectra against proteoforms
of its database; then both speeds on this machine."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rtsearch.config import ProteoformConfig
from rtsearch.database.fasta import read_fasta
from rtsearch.io.msalign import read_msalign
from rtsearch.proteoforms.database import build_proteoforms
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.topdown.generating import Question, Residues, log10_pvalues
from rtsearch.scoring.topdown.gpu import align_pairs
from rtsearch.scoring.topdown.prm import prm_masses
from tests.conftest import data_dir

pytestmark = pytest.mark.gpu


def _random_grid(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    prefix = np.concatenate([[0.0], np.cumsum(rng.choice([57.02, 71.04, 87.03, 99.07, 113.08, 128.09], 6))])
    truth = prefix + np.where(np.arange(7) >= rng.integers(1, 6), rng.choice([0.0, 15.99, 79.97]), 0.0)
    keep = np.sort(rng.choice(np.arange(1, 6), rng.integers(2, 5), replace=False))
    noise = rng.uniform(50, 600, rng.integers(0, 3))
    return np.concatenate([[0.0], np.sort(np.concatenate([truth[keep], noise])), [truth[-1]]]), prefix


@pytest.mark.parametrize("shifts", [0, 1, 2])
def test_random_grids_same_scores(shifts: int) -> None:
    cp = get_backend("cupy").xp
    grids = [_random_grid(s) for s in range(200)]
    prms, prefixes = [g[0] for g in grids], [g[1] for g in grids]
    pairs = np.array([(k, k) for k in range(200)] + [(k, (k * 7) % 200) for k in range(200)])
    kw = {"tolerance": 0.02, "max_shifts": shifts, "max_shift_mass": 200.0}
    want = align_pairs(prms, prefixes, pairs, **kw)
    got = align_pairs(prms, prefixes, pairs, xp=cp, **kw)
    assert np.array_equal(got, want)
    assert (want[:, -1] > 0).sum() > 50 and len(np.unique(want)) > 3  # many grids hold a path, scores vary


@pytest.mark.parametrize("shifts", [0, 1, 2])
def test_known_shifts_same_scores(shifts: int) -> None:
    """Known shifts (the five default known PTMs' masses), up to one or two a path beside the unknown ones: the
    reference's scores, layer for layer, on grids that carry two modifications, one of them known."""
    cp = get_backend("cupy").xp
    rng = np.random.default_rng(20 + shifts)
    known = np.array([42.010565, 79.966331, 15.994915, 14.01565, 28.0313])
    prms, prefixes = [], []
    for _ in range(300):
        prefix = np.concatenate([[0.0], np.cumsum(rng.choice([57.02, 71.04, 87.03, 99.07, 113.08, 128.09], 9))])
        truth = prefix.copy()
        for shift in (rng.choice(known), rng.choice([0.0, 0.0, 57.3, -120.7])):
            truth += np.where(np.arange(10) >= rng.integers(1, 9), shift, 0.0)
        keep = np.sort(rng.choice(np.arange(1, 9), rng.integers(3, 8), replace=False))
        noise = rng.uniform(50, 900, rng.integers(0, 4))
        prms.append(np.concatenate([[0.0], np.sort(np.concatenate([truth[keep], noise])), [truth[-1]]]))
        prefixes.append(prefix)
    pairs = np.array([(k, k) for k in range(300)] + [(k, (k * 13) % 300) for k in range(300)])
    for max_known in (1, 2):
        kw = {"tolerance": 0.02, "max_shifts": shifts, "max_shift_mass": 200.0, "known": known,
              "max_known": max_known, "known_reach": 160.0}  # fmt: skip
        want = align_pairs(prms, prefixes, pairs, **kw)
        assert want.shape == (600, (shifts + 1) * (max_known + 1))
        assert np.array_equal(align_pairs(prms, prefixes, pairs, xp=cp, **kw), want)
        assert (want[:300, 1] > want[:300, 0]).sum() > 50  # a known shift made a difference


def test_a_tolerance_a_pair_same_scores() -> None:
    """Each pair its own fragment tolerance (ppm of the precursor mass, as searches use): the reference's scores."""
    cp = get_backend("cupy").xp
    rng = np.random.default_rng(3)
    grids = [_random_grid(s) for s in range(300)]
    prms = [np.r_[g[0][0], np.sort(g[0][1:-1] + rng.normal(0, 0.03, len(g[0]) - 2)), g[0][-1]] for g in grids]
    prefixes = [g[1] for g in grids]
    pairs = np.array([(k, k) for k in range(300)])
    tols = rng.choice([0.005, 0.02, 0.05, 0.12], 300)
    kw = {"tolerance": tols, "max_shifts": 1, "max_shift_mass": 200.0}
    want = align_pairs(prms, prefixes, pairs, **kw)
    assert np.array_equal(align_pairs(prms, prefixes, pairs, xp=cp, **kw), want)
    scalar = align_pairs(prms, prefixes, pairs, tolerance=0.005, max_shifts=1, max_shift_mass=200.0)
    assert not np.array_equal(scalar, want)  # the tolerances made a difference


def _ecoli(n_spectra: int, n_forms: int):
    folder = data_dir() / "topdown-flashapp-ecoli"
    db = build_proteoforms(read_fasta(folder / "example_database.fasta"), ProteoformConfig(decoys="none"))
    spectra = [s for s in read_msalign(folder / "toppic_ms2.msalign") if not s.problem][:n_spectra]
    prms = [prm_masses(s.mass, s.precursors[0].mass, s.activation, merge_within=0.02) for s in spectra]
    forms = np.random.default_rng(1).choice(len(db.form_mass), n_forms, replace=False)
    prefixes = [db.form_prefix(int(f))[:401] for f in forms]
    pairs = np.array([(a, b) for a in range(len(prms)) for b in range(len(prefixes))])
    tols = np.array([spectra[a].precursors[0].mass * 15e-6 for a, _ in pairs.tolist()])
    return prms, prefixes, pairs, tols


def test_real_spectra_same_scores_and_speed() -> None:
    cp = get_backend("cupy").xp
    prms, prefixes, pairs, tols = _ecoli(50, 20)
    kw = {"tolerance": 0.02, "max_shifts": 1, "max_shift_mass": 500.0, "precursor_tolerance": tols}
    t0 = time.perf_counter()
    want = align_pairs(prms, prefixes, pairs, **kw)
    t1 = time.perf_counter()
    align_pairs(prms[:2], prefixes[:2], pairs[:2], xp=cp, **{**kw, "precursor_tolerance": tols[:2]})  # compile
    t2 = time.perf_counter()
    got = align_pairs(prms, prefixes, pairs, xp=cp, **kw)
    t3 = time.perf_counter()
    assert np.array_equal(got, want)
    cells = sum(len(prms[a]) * len(prefixes[b]) * 2 for a, b in pairs.tolist())
    print(f"\ntop-down alignment, {len(pairs)} pairs, {cells / 1e6:.1f} M cells (1 shift): NumPy {t1 - t0:.2f} s "
          f"({cells / (t1 - t0) / 1e6:.1f} M cells/s), CuPy {t3 - t2:.3f} s ({cells / (t3 - t2) / 1e6:.1f} M cells/s)")
    prms, prefixes, pairs, tols = _ecoli(200, 200)  # every searchable spectrum of the run x 200 forms, CuPy only
    cells = sum(len(prms[a]) * len(prefixes[b]) * 2 for a, b in pairs.tolist())
    for _ in range(2):
        t0 = time.perf_counter()
        align_pairs(prms, prefixes, pairs, xp=cp, **{**kw, "precursor_tolerance": tols})
        secs = time.perf_counter() - t0
        print(f"CuPy: {len(pairs):,} pairs, {cells / 1e9:.2f} G cells in {secs:.3f} s: "
              f"{cells / secs / 1e9:.2f} G cells/s, {len(pairs) / secs:,.0f} alignments/s")


def test_truncation_candidates_same_on_both_backends() -> None:
    """Diagonal counts, the best starts and ends, and terminal truncations by mass: the same on CuPy as on NumPy
    (real spectra against 800 of the database's proteins and their decoys: NumPy's counts take seconds a spectrum
    on the whole)."""
    from rtsearch.config import TopDownConfig
    from rtsearch.scoring.topdown.search import window_of
    from rtsearch.scoring.topdown.truncation import Positions, candidates, terminal

    cp = get_backend("cupy").xp
    folder = data_dir() / "topdown-flashapp-ecoli"
    db = build_proteoforms(read_fasta(folder / "example_database.fasta")[:800], ProteoformConfig())
    on_np, on_cp = Positions(db), Positions(db, cp)
    s = TopDownConfig()
    for sp in [x for x in read_msalign(folder / "toppic_ms2.msalign") if not x.problem][:6]:
        m = sp.precursors[0].mass
        prm = prm_masses(sp.mass, m, sp.activation, merge_within=s.tolerance(m))
        for a, b in zip(on_np.counts(prm, m - 18.010564684, s.tolerance(m)),
                        on_cp.counts(prm, m - 18.010564684, s.tolerance(m)), strict=True):  # fmt: skip
            assert np.array_equal(a, cp.asnumpy(b))
        kw = {"tol": s.tolerance(m), "window": window_of(m, s)}
        assert candidates(on_np, prm, m - 18.010564684, **kw) == candidates(on_cp, prm, m - 18.010564684, **kw)
        assert terminal(db, on_np, m - 18.010564684, tol=m * 15e-6) == terminal(db, on_cp, m - 18.010564684,
                                                                                 tol=m * 15e-6)  # fmt: skip


def test_generating_function_same_values() -> None:
    """The generating-function kernel gives the NumPy reference's p-values bit for bit: the FLASHApp run's spectra
    at their precursors, scores 1 to 12, with and without a shift's second diagonal and an N-terminal start."""
    cp = get_backend("cupy").xp
    folder = data_dir() / "topdown-flashapp-ecoli"
    db = build_proteoforms(read_fasta(folder / "example_database.fasta"), ProteoformConfig())
    residues = Residues(*db.composition)
    questions = []
    for k, sp in enumerate(x for x in read_msalign(folder / "toppic_ms2.msalign") if not x.problem):
        if k == 40:
            break
        m = sp.precursors[0].mass
        tol = max(0.02, 1e-5 * m)
        inner = prm_masses(sp.mass, m, sp.activation, merge_within=tol)[1:-1]
        shift = (k % 5 - 2) * 41.3
        marks = np.concatenate([inner, inner - shift]) if shift else inner
        questions.append(Question(marks, tol, m - 18.010564684 - shift, 1.5e-5 * m, 42.010565 * (k % 3 == 0),
                                  1 + k % 12))  # fmt: skip
    want = log10_pvalues(questions, residues)
    got = log10_pvalues(questions, residues, xp=cp)
    assert np.array_equal(got, want), np.abs(got - want).max()
    assert (want < 0).sum() > 30


def test_whole_form_candidates_and_terminal_truncations_of_a_run_at_once() -> None:
    """Every precursor's whole-form candidates (one launch of the forms' diagonal counts) and terminal truncations
    (sorted searches of many precursors at once): on CuPy those of NumPy's one precursor at a time."""
    from rtsearch.config import TopDownConfig
    from rtsearch.scoring.topdown.search import candidates, candidates_of
    from rtsearch.scoring.topdown.truncation import Positions, terminal, terminals

    cp = get_backend("cupy").xp
    folder = data_dir() / "topdown-flashapp-ecoli"
    db = build_proteoforms(read_fasta(folder / "example_database.fasta"), ProteoformConfig())
    s = TopDownConfig()
    spectra = [x for x in read_msalign(folder / "toppic_ms2.msalign") if not x.problem]
    mass = np.array([p.mass for sp in spectra for p in sp.precursors])
    prms = [prm_masses(sp.mass, p.mass, sp.activation, merge_within=s.tolerance(p.mass)) for sp in spectra
            for p in sp.precursors]  # fmt: skip
    got = candidates_of(db, prms, mass, s, cp)
    assert len(got) == len(prms) > 100
    for prm, m, g in zip(prms, mass.tolist(), got, strict=True):
        assert np.array_equal(g, candidates(db, prm, m, s))
    on_np, on_cp = Positions(db), Positions(db, cp)
    tol = mass * 15e-6
    many = terminals(db, on_cp, mass - 18.010564684, tol)
    assert sum(map(len, many)) > 1000
    for m, t, g in zip(mass.tolist(), tol.tolist(), many, strict=True):
        assert g == terminal(db, on_np, m - 18.010564684, tol=t)
