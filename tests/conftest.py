"""Shared fixtures: where the real data lives, and indexes built once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """The shared real-data folder: $RTSEARCH_DATA, else ../shared/data beside the checkout."""
    for cand in (os.environ.get("RTSEARCH_DATA"), ROOT / "shared" / "data", ROOT.parent / "shared" / "data"):
        if cand and (Path(cand) / "ecoli-small").is_dir():
            return Path(cand)
    raise RuntimeError("real data not found: set RTSEARCH_DATA to the shared/data folder")


@pytest.fixture(scope="session")
def data() -> Path:
    return data_dir()
