"""The daemon serving a proteoform database: the simulator replays a real msalign run (deconvoluted spectra on the
wire as charge-1 spectra), every spectrum is answered once, PrSMs carry the top-down fields, the run's file is
the offline search's (NumPy, whole N-terminal forms: seconds)."""

from __future__ import annotations

import csv

import pytest

from rtsearch.config import ProteoformConfig, TopDownConfig
from rtsearch.database.fasta import read_fasta
from rtsearch.proteoforms.database import build_proteoforms
from rtsearch.scoring.backend import get_backend
from rtsearch.search.topdown import RESULT_FIELDS, TopDownTarget
from rtsearch_sim.replay import load_run
from tests.streaming import replay_through, running, serve_config

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module")
def flashapp(data):
    folder = data / "topdown-flashapp-ecoli"
    db = build_proteoforms(read_fasta(folder / "example_database.fasta"), ProteoformConfig())
    spectra = load_run(folder / "toppic_ms2.msalign")[:30]
    return db, spectra


async def test_a_top_down_run_is_answered_once_with_proteoform_fields(flashapp, tmp_path) -> None:
    db, spectra = flashapp
    target = TopDownTarget(db, TopDownConfig(truncations=False), get_backend("numpy"))
    async with running(target, serve_config(tmp_path)) as daemon:
        sent, col = await replay_through(daemon, [("flash", spectra)], rate=200.0)
        report = col.report(sent.ms2)
    assert report.sent == 30 and report.lost == 0 and report.duplicates == 0
    results = col.results()
    matched = [r for r in results if r.get("peptide")]
    assert len(results) == 30 and len(matched) >= 25  # whole forms within 500 Da of nearly every precursor
    for r in matched:
        assert r["charge"] == 1 and r["proteins"][0] and r["evalue"] > 0
        assert all(f in r for f in RESULT_FIELDS)
        assert (r["unknown_shifts"] + r["known_shifts"] > 0) == ("[" in r["peptide"].replace("[Acetyl]-", ""))
    (done,) = daemon.finished
    with open(done.path, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == 30 and all(f in rows[0] for f in RESULT_FIELDS)
