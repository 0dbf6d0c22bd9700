"""BSA1 through simulator → daemon serving a spectral library → collector: nothing lost, the offline top-1."""

from __future__ import annotations

import csv

import pytest

from rtsearch.cli import main
from rtsearch.config import load_config
from rtsearch.library.store import import_library, load_library
from rtsearch.scoring.backend import get_backend
from rtsearch.search.library import LibraryTarget
from rtsearch.search.table import result_columns
from rtsearch_sim.replay import load_run
from tests.devruns import DEV_RUNS
from tests.streaming import replay_through, running, serve_config


@pytest.mark.slow
@pytest.mark.asyncio
async def test_served_library_answers_every_spectrum_as_offline(data, tmp_path):
    dev = next(d for d in DEV_RUNS if d.name == "BSA1")
    _, run_path = dev.paths(data)
    import_library([data / "spectral-libraries/nist-bsa_consensus.msp"], tmp_path / "lib")
    (tmp_path / "s.toml").write_text(f'[search]\nprecursor_tolerance = "{dev.precursor}"\n')
    offline_tsv = tmp_path / "offline.tsv"
    assert main(["search", str(run_path), "--library", str(tmp_path / "lib"), "--config", str(tmp_path / "s.toml"),
                 "--backend", "numpy", "-o", str(offline_tsv)]) == 0  # fmt: skip
    with open(offline_tsv, newline="") as fh:
        offline = {int(r["scan"]): r for r in csv.DictReader(fh, delimiter="\t")}
    lib = load_library(tmp_path / "lib")
    search = load_config(tmp_path / "s.toml").search  # as the offline search read it
    engine = LibraryTarget(lib, search.precursor_tolerance, get_backend("numpy"), isotope_errors=search.isotope_errors)
    spectra = load_run(run_path)
    async with running(engine, serve_config(tmp_path)) as daemon:

        sent, col = await replay_through(daemon, [(dev.name, spectra)], rate=3000.0, idle_s=30, timeout_s=300)
    report = col.report(sent.ms2)
    print(f"\nBSA1 served from the library: {report}")
    assert report.sent == len(offline) > 0 and report.lost == 0 and report.duplicates == 0
    results = {r["scan"]: r for r in col.results()}
    scored = [r for r in results.values() if r.get("peptide")]
    assert len(scored) > 100
    differ = [s for s, r in results.items() if (r.get("peptide") or "") != offline[s]["peptide"]]
    assert not differ, f"{len(differ)} spectra differ from the offline library search, e.g. {differ[:3]}"
    for r in scored:  # the library's scores travel with each scored result, as offline
        row = offline[r["scan"]]
        assert r["library_id"] == int(row["library_id"])
        assert r["f_value"] == pytest.approx(float(row["f_value"]), abs=1e-9)
        assert r["dot"] == pytest.approx(float(row["dot"]), abs=1e-9)
        assert {"dot_bias", "delta_dot"} <= r.keys()
    # the run's results file (written at run.end, in the refit process): the offline file's columns and counts
    (path,) = [f.path for f in daemon.finished]
    with open(path, newline="") as fh:
        served = list(csv.DictReader(fh, delimiter="\t"))
    assert tuple(served[0].keys()) == result_columns(engine) == tuple(next(iter(offline.values())))
    at_5pct = lambda rows: sum(r["is_decoy"] == "false" and r["q_value"] not in ("", None)  # noqa: E731
                               and float(r["q_value"]) <= 0.05 for r in rows)  # fmt: skip
    assert at_5pct(served) == at_5pct(offline.values()) >= 90  # none at 1 %: BSA1 holds under 100 confident
    assert daemon.finished[0].summary.psms_at_5pct == at_5pct(served)
