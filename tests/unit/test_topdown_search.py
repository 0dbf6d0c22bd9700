"""Top-down search's NumPy reference (`rtsearch.scoring.topdown.search`): a spectrum simulated from a proteoform of
the E. coli database (seeded: a subset of its b and y ions, noise masses, one unknown shift) finds that form,
its shift and its mass difference among the database's 35,000 forms and their decoys."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.config import ProteoformConfig, TopDownConfig
from rtsearch.database.fasta import read_fasta
from rtsearch.proteoforms.database import build_proteoforms
from rtsearch.scoring.topdown.prm import prm_masses
from rtsearch.scoring.topdown.search import candidates, search_spectrum
from tests.conftest import data_dir
from tests.topdown_sim import simulate


@pytest.fixture(scope="module")
def ecoli():
    return build_proteoforms(read_fasta(data_dir() / "topdown-flashapp-ecoli" / "example_database.fasta"),
                             ProteoformConfig())  # fmt: skip


@pytest.mark.parametrize(("seed", "shift"), [(1, 79.966331), (2, 42.010565), (3, -131.040485), (4, 0.0)])
def test_a_simulated_spectrum_finds_its_proteoform(ecoli, seed: int, shift: float) -> None:
    rng = np.random.default_rng(seed)
    targets = np.flatnonzero(~ecoli.is_decoy[ecoli.form_protein])
    form = int(rng.choice(targets[(ecoli.form_mass[targets] > 8_000) & (ecoli.form_mass[targets] < 30_000)]))
    sp = simulate(ecoli, form, shift, rng)
    s = TopDownConfig(tolerance_da=0.01, fragment_ppm=0)
    prm = prm_masses(sp.mass, sp.precursors[0].mass, "HCD", merge_within=s.tolerance(sp.precursors[0].mass))
    first = candidates(ecoli, prm, sp.precursors[0].mass, s)[0]  # its two diagonals rank it first
    assert abs(ecoli.form_mass[first] - ecoli.form_mass[form]) < 1e-6
    got = search_spectrum(ecoli, sp, s)
    same_mass = np.flatnonzero(np.abs(ecoli.form_mass - ecoli.form_mass[form]) < 1e-6)  # one form, several names
    assert got.form in same_mass and not got.decoy
    assert (got.shifts, got.known) == ((0, 0) if shift == 0 else (1, 0))  # known PTMs too, by default
    assert got.mass_difference == pytest.approx(shift, abs=1e-6)
    assert got.score >= 30  # of its 40 cleavages' PRMs; the noise masses explain next to nothing
    if np.any(np.abs(ecoli.known.mass - shift) < 1e-4):  # Phospho, Acetyl: with known shifts on, one of those
        known = search_spectrum(ecoli, sp, TopDownConfig(tolerance_da=0.01, fragment_ppm=0, known_shifts=2))
        assert (known.form, known.score, known.shifts, known.known) == (got.form, got.score, 0, 1)


def test_a_truncated_proteoform_is_found_by_its_diagonals() -> None:
    """A sub-sequence of a protein (no N-terminal form can be it), with and without a shift: found with the
    positions of a 150-protein database and their decoys, at its residues."""
    from rtsearch.scoring.topdown.truncation import Positions

    db = build_proteoforms(read_fasta(data_dir() / "topdown-flashapp-ecoli" / "example_database.fasta")[:150],
                           ProteoformConfig())  # fmt: skip
    positions = Positions(db)
    rng = np.random.default_rng(7)
    long = [k for k in range(150) if db.offsets[k + 1] - db.offsets[k] > 200]
    for shift in (0.0, 79.966331):
        k = int(rng.choice(long))
        a, b = int(rng.integers(20, 60)), int(rng.integers(120, 180))
        full = db.prefix_of(k)
        sp = simulate(db, -1, shift, rng, prefix=full[a : b + 1] - full[a])
        plain = search_spectrum(db, sp, TopDownConfig(tolerance_da=0.01, fragment_ppm=0))
        got = search_spectrum(db, sp, TopDownConfig(tolerance_da=0.01, fragment_ppm=0), positions)
        assert (got.protein, got.start, got.end, got.form) == (k, a, b, -1) and not got.decoy
        assert got.shifts == (0 if shift == 0 else 1) and got.mass_difference == pytest.approx(shift, abs=1e-6)
        assert got.score >= 30 and plain.score < got.score  # whole forms alone do not explain it


def test_positions_diagonal_counts_are_one_sorted_search_a_position_and_prm() -> None:
    """The host's diagonal counts (by residue offsets and a table of mass bins) equal their definition — a PRM s
    counts for position p's start when some prefix mass is within tol of g[p] + s, for its end when one is within
    tol of g[p] − (M − s) — on real FLASHApp spectra against 300 proteins and their decoys, with a PRM below the
    tolerance and one within it of the precursor (each position's own mass) and a tolerance wide enough for two
    PRMs to share a prefix mass."""
    from rtsearch.io.msalign import read_msalign
    from rtsearch.scoring.topdown.prm import near
    from rtsearch.scoring.topdown.truncation import Positions

    db = build_proteoforms(read_fasta(data_dir() / "topdown-flashapp-ecoli" / "example_database.fasta")[:300],
                           ProteoformConfig())  # fmt: skip
    pos = Positions(db)
    g = pos.mass_host
    s = TopDownConfig()
    spectra = [x for x in read_msalign(data_dir() / "topdown-flashapp-ecoli" / "toppic_ms2.msalign") if not x.problem]
    for sp, widen in [(sp, 1.0) for sp in spectra[:4]] + [(spectra[4], 8.0)]:
        m = sp.precursors[0].mass
        tol = s.tolerance(m) * widen
        prm = prm_masses(sp.mass, m, sp.activation, merge_within=tol)
        m_res = m - 18.010564684
        prm = np.unique(np.concatenate([prm, [tol / 2, m_res - tol / 3]]))
        inner = prm[1:-1]
        want_n = np.array([near(g, g + x, tol) for x in inner]).sum(axis=0)
        want_c = np.array([near(g, g - (m_res - x), tol) for x in inner]).sum(axis=0)
        got_n, got_c = pos.counts(prm, m_res, tol)
        np.testing.assert_array_equal(got_n, want_n)
        np.testing.assert_array_equal(got_c, want_c)
        assert got_n.min() >= 1 and got_c.min() >= 1 and got_n.max() >= 4  # the two edge PRMs, and real diagonals


def test_best_positions_are_a_stable_sorts_first() -> None:
    """The truncations' best starts and ends by the counts' histogram: the same positions, in the same order, as the
    first ``k`` of a stable sort by count (ties many: counts of 0–4 over up to 300 positions; a few high counts
    among many zeros; ``k`` beyond the positions)."""
    from rtsearch.scoring.topdown.truncation import _best

    rng = np.random.default_rng(0)
    for t in range(300):
        n = int(rng.integers(1, 300))
        counts = rng.integers(0, 5, n) if t % 2 else np.where(rng.random(n) < 0.05, rng.integers(1, 40, n), 0)
        k = int(rng.integers(1, 60)) if t % 3 else n + 5
        assert _best(counts, k, np).tolist() == np.argsort(-counts, kind="stable")[:k].tolist()


def test_terminal_truncations_are_found_by_mass(ecoli) -> None:
    """A suffix of a protein and an acetylated form cut short, each at its mass (and one isotope off): found by
    `terminal` with their residues and form; a mass matching nothing finds nothing of that protein."""
    from rtsearch.scoring.topdown.truncation import ISOTOPE, Positions, terminal

    db = build_proteoforms(read_fasta(data_dir() / "topdown-flashapp-ecoli" / "example_database.fasta")[:120],
                           ProteoformConfig())  # fmt: skip
    pos = Positions(db)
    k = 17
    full = db.prefix_of(k)
    n = len(full) - 1
    got = terminal(db, pos, full[n] - full[40], tol=0.01)
    assert (k, 40, n, -1) in got
    got = terminal(db, pos, full[n] - full[40] + ISOTOPE, tol=0.01)
    assert (k, 40, n, -1) in got  # one isotope heavier
    acetyl = next(f for f in np.flatnonzero(db.form_protein == k).tolist() if db.form_delta[f] > 0)
    s = int(db.form_start[acetyl])
    got = terminal(db, pos, full[60] - full[s] + db.form_delta[acetyl], tol=0.01)
    assert (k, s, 60, acetyl) in got
    assert all(g[0] != k for g in terminal(db, pos, 1234.5678, tol=0.001, isotopes=(0,)))


def test_diagonal_counts_of_all_forms_at_once_are_each_forms_own(ecoli) -> None:
    """The forms' diagonal counts, laid end to end in one search, equal each form's own count (the PRMs near
    one of its inner prefix masses, or near one plus its whole mass difference) on real spectra."""
    from rtsearch.io.msalign import read_msalign
    from rtsearch.scoring.topdown.prm import near
    from rtsearch.scoring.topdown.search import diagonal_counts, in_window

    s = TopDownConfig()
    folder = data_dir() / "topdown-flashapp-ecoli"
    for sp in [x for x in read_msalign(folder / "toppic_ms2.msalign") if not x.problem][:6]:
        m = sp.precursors[0].mass
        prm = prm_masses(sp.mass, m, sp.activation, merge_within=s.tolerance(m))
        forms = in_window(ecoli, m, s)
        tol = s.tolerance(m)
        got = diagonal_counts(ecoli, forms, prm, m - ecoli.form_mass[forms], tol)
        for f, g in zip(forms.tolist(), got.tolist(), strict=True):
            p, inner, shift = ecoli.form_prefix(f)[1:-1], prm[1:-1], m - ecoli.form_mass[f]
            want = near(p, inner, tol) | (near(p + shift, inner, tol) & (abs(shift) > tol))
            assert g == int(want.sum())
        assert got.max() > 0


def test_proteins_heavier_than_the_gap_are_still_laid_in_order() -> None:
    """A 1.1 MDa protein (6,000 W) between two small ones: the positions laid end to end stay increasing, so
    its own diagonals and the next protein's are counted apart (before: each protein 10^6 Da after the last one's
    start, and a heavier protein ran into the next)."""
    from rtsearch.database.fasta import Protein
    from rtsearch.scoring.topdown.truncation import Positions

    proteins = [Protein("a", "MKTAYIAKQR"), Protein("big", "M" + "W" * 6000), Protein("c", "MSEQWENCE")]
    db = build_proteoforms(proteins, ProteoformConfig(decoys="none"))
    g = Positions(db).mass_host
    assert db.prefix_of(1)[-1] > 1.1e6 and np.all(np.diff(g) > 0)
