"""The result currency (`rtsearch.matches`): one declaration of the fields, and what really travels."""

from __future__ import annotations

import re

import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.library.store import import_library, load_library
from rtsearch.matches import LIVE_FIELDS, RESULT_COLUMNS, ResultMessage
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.library import LibraryResult, LibraryTarget
from rtsearch.search.live import LiveRun
from rtsearch.search.table import PsmTable, result_columns
from rtsearch.types import Tolerance
from tests.conftest import ROOT

WIRE = set(ResultMessage.__annotations__)
STAMPS = {"v", "sent_ns", "received_ns", "published_ns"}  # added on the way out


def documented_fields() -> set[str]:
    """Every field named in the first column of docs/protocol.md's result message table."""
    text = (ROOT / "docs" / "protocol.md").read_text().split("## Result message", 1)[1].split("\n\n", 2)[1]
    return {f for row in text.splitlines()[2:] for f in re.findall(r"`(\w+)`", row.split("|")[1])}


def test_the_protocol_documents_every_declared_field_and_no_other() -> None:
    assert documented_fields() == WIRE | set(LibraryTarget.result_fields)
    assert set(LibraryTarget.result_fields) == set(LibraryResult.__annotations__) - WIRE


def test_a_live_result_carries_the_file_columns_but_the_end_of_run_ones() -> None:
    assert RESULT_COLUMNS[:2] == ("run", "scan")
    assert set(LIVE_FIELDS) == set(RESULT_COLUMNS) - {"peptide_q_value", "pep", "rt", "spectrum_id", "rank"}
    assert set(LIVE_FIELDS) <= WIRE


def _check(target, spectra, extra: set[str]) -> None:
    live = LiveRun("r", target)
    results = live.add_scored(target.score(SpectraBatch.of(spectra))).messages()
    scored = [r for r in results if "peptide" in r]
    assert scored and len(scored) < len(results)  # both kinds of answer occur
    for r in results:
        keys = set(r)
        if "peptide" in r:
            assert keys == WIRE - STAMPS - {"reason"} | extra, keys ^ (WIRE - STAMPS - {"reason"} | extra)
        else:
            assert keys == {"run", "scan", "status", "reason", "precursor_mz"} and r["reason"]
    table = PsmTable(target)
    table.add(target.score(SpectraBatch.of(spectra)))
    cols = table.columns()
    assert tuple(cols) == result_columns(target) == table.column_names
    assert tuple(cols)[: len(RESULT_COLUMNS)] == RESULT_COLUMNS
    assert set(extra) <= set(cols) and len(set(cols)) == len(cols)


def test_database_results_carry_exactly_the_declared_fields(demo_index) -> None:
    cfg = load_config(bundled(TOML)).search
    spectra = list(read_spectra(bundled(RUN)))
    _check(DatabaseTarget(demo_index, cfg, get_backend("numpy")), spectra, set())


@pytest.mark.slow
def test_library_results_carry_the_library_fields_too(data, tmp_path) -> None:
    import_library([data / "spectral-libraries/nist-bsa_consensus.msp"], tmp_path / "lib")
    spectra = list(read_spectra(data / "bsa-orbitrapxl/BSA1.mzML.gz"))[:300]
    target = LibraryTarget(load_library(tmp_path / "lib"), Tolerance.parse("20 ppm"), get_backend("numpy"),
                           isotope_errors=(0, 1))  # fmt: skip
    _check(target, spectra, set(LibraryTarget.result_fields))


def test_names_worked_out_where_a_batch_is_scored_give_the_same_answers(demo_index) -> None:
    import pickle

    import numpy as np

    from rtsearch.search.live import named

    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    spectra = SpectraBatch.of(list(read_spectra(bundled(RUN))))
    scored = target.score(spectra)
    with_names = pickle.loads(pickle.dumps(named(target, target.score(spectra))))  # as the engine process sends it
    assert scored.names is None and with_names.names is not None
    hit = np.flatnonzero(scored.best.match >= 0)
    assert 0 < len(hit) < len(scored)
    miss = int(np.flatnonzero(scored.best.match < 0)[0])
    assert with_names.names.peptides[miss] == "" and with_names.names.proteins[miss] == []
    assert [with_names.names.peptides[i] for i in hit] == target.peptides(scored.best.match[hit])
    # two runs' parts of one batch, named or not: the same messages
    rows = [np.arange(0, len(scored), 2), np.arange(1, len(scored), 2)]
    for part in rows:
        plain = LiveRun("r", target).add_scored(scored.take(part)).messages()
        assert LiveRun("r", target).add_scored(with_names.take(part)).messages() == plain
        assert any("peptide" in m for m in plain)
