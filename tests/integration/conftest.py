"""Fixtures of the daemon tests: the Ecoli dev run as the simulator sends it, the bundled target on NumPy."""

from __future__ import annotations

import pytest

from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch_sim.replay import load_run


@pytest.fixture(scope="session")
def ecoli_run(data):
    """Every MS1 and MS2 spectrum of Ecoli_MS2_small, in file order."""
    return load_run(data / "ecoli-small/Ecoli_MS2_small.mzML")


@pytest.fixture()
def engine(demo_index):
    """The bundled E. coli target (what `rtsearch demo` searches) on NumPy."""
    return DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
