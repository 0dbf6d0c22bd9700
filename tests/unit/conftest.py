"""Fixtures of the unit tests: real spectra for the wire protocol tests (``test_wire*.py``), the BSA index."""

from __future__ import annotations

import itertools

import pytest

from rtsearch.config import DatabaseConfig
from rtsearch.database.build import build_index
from rtsearch.database.index import PeptideIndex
from rtsearch.io.spectra import read_spectra
from rtsearch.types import Spectrum


@pytest.fixture(scope="session")
def ms2(data) -> list[Spectrum]:
    """The first three MS2 spectra of the real E. coli file."""
    spectra = list(itertools.islice(read_spectra(data / "ecoli-small" / "Ecoli_MS2_small.mzML"), 3))
    assert len(spectra) == 3
    # what the file says (checked once so the round trips below test something real)
    assert [s.scan for s in spectra] == [11461, 11462, 11463]
    assert [s.charges for s in spectra] == [(2,), (3,), (4,)]
    assert all(s.n_peaks > 100 for s in spectra)
    return spectra


@pytest.fixture(scope="session")
def sp(ms2) -> Spectrum:
    return ms2[0]


@pytest.fixture(scope="session")
def bsa(data) -> PeptideIndex:
    """The index of the BSA run's FASTA (444 peptides), default digest."""
    return build_index([data / "bsa-orbitrapxl" / "BSA.fasta"], DatabaseConfig())
