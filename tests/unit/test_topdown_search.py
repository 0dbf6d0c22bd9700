"""Top-down search's NumPy reference (`rtsearch.scoring.topdown.search`): a spectrum simulated from a proteoform of
the E. coli database (seeded: a subset of its b and y ions, noise masses, one unknown shift) finds that form,
its shift and its mass difference among the database's 35,000 forms and their decoys."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.config import ProteoformConfig
from rtsearch.database.fasta import read_fasta
from rtsearch.proteoforms.database import build_proteoforms
from rtsearch.scoring.topdown.prm import WATER, prm_masses
from rtsearch.scoring.topdown.search import TopDownSettings, candidates, search_spectrum
from rtsearch.types import DeconvolutedSpectrum, Precursor
from tests.conftest import data_dir


@pytest.fixture(scope="module")
def ecoli():
    return build_proteoforms(read_fasta(data_dir() / "topdown-flashapp-ecoli" / "example_database.fasta"),
                             ProteoformConfig())  # fmt: skip


def _simulate(db, form: int, shift: float, rng: np.random.Generator, prefix: np.ndarray | None = None
              ) -> DeconvolutedSpectrum:  # fmt: skip
    prefix = db.form_prefix(form) if prefix is None else prefix
    n = len(prefix) - 1
    site = int(rng.integers(n // 4, 3 * n // 4))
    true = prefix + np.where(np.arange(n + 1) > site, shift, 0.0)
    precursor = true[-1] + WATER
    cut = np.sort(rng.choice(np.arange(1, n), min(40, n - 1), replace=False))
    b, y = true[cut[::2]], precursor - true[cut[1::2]]
    noise = rng.uniform(300, precursor - 300, 40)
    mass = np.sort(np.concatenate([b, y, noise]))
    return DeconvolutedSpectrum("sim", 1, 2, mass, np.ones(len(mass), np.float32), np.ones(len(mass), np.int16),
                                (Precursor(precursor),), activation="HCD")  # fmt: skip


@pytest.mark.parametrize(("seed", "shift"), [(1, 79.966331), (2, 42.010565), (3, -131.040485), (4, 0.0)])
def test_a_simulated_spectrum_finds_its_proteoform(ecoli, seed: int, shift: float) -> None:
    rng = np.random.default_rng(seed)
    targets = np.flatnonzero(~ecoli.is_decoy[ecoli.form_protein])
    form = int(rng.choice(targets[(ecoli.form_mass[targets] > 8_000) & (ecoli.form_mass[targets] < 30_000)]))
    sp = _simulate(ecoli, form, shift, rng)
    s = TopDownSettings(tolerance_da=0.01)
    prm = prm_masses(sp.mass, sp.precursors[0].mass, "HCD", merge_within=s.tolerance_da)
    first = candidates(ecoli, prm, sp.precursors[0].mass, s)[0]  # its two diagonals rank it first
    assert abs(ecoli.form_mass[first] - ecoli.form_mass[form]) < 1e-6
    got = search_spectrum(ecoli, sp, s)
    same_mass = np.flatnonzero(np.abs(ecoli.form_mass - ecoli.form_mass[form]) < 1e-6)  # one form, several names
    assert got.form in same_mass and not got.decoy
    assert got.shifts == (0 if shift == 0 else 1)
    assert got.mass_difference == pytest.approx(shift, abs=1e-6)
    assert got.score >= 30  # of its 40 cleavages' PRMs; the noise masses explain next to nothing


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
        sp = _simulate(db, -1, shift, rng, prefix=full[a : b + 1] - full[a])
        plain = search_spectrum(db, sp, TopDownSettings(tolerance_da=0.01))
        got = search_spectrum(db, sp, TopDownSettings(tolerance_da=0.01), positions)
        assert (got.protein, got.start, got.end, got.form) == (k, a, b, -1) and not got.decoy
        assert got.shifts == (0 if shift == 0 else 1) and got.mass_difference == pytest.approx(shift, abs=1e-6)
        assert got.score >= 30 and plain.score < got.score  # whole forms alone do not explain it
