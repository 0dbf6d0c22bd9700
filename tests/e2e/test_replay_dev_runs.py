"""Every dev run through simulator → daemon → collector: nothing lost, the offline search's top-1 peptides."""

from __future__ import annotations

import csv

import pytest

from rtsearch.cli import main
from rtsearch.database.store import load_index
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch_sim.replay import load_run
from tests.devruns import DEV_RUNS
from tests.streaming import replay_through, running, serve_config


def _offline_top1(run, index_dir, dev, tmp_path) -> dict[int, str]:
    cfg = tmp_path / "search.toml"
    cfg.write_text(f'[search]\nprecursor_tolerance = "{dev.precursor}"\nfragment_tolerance = "{dev.fragment}"\n')
    out = tmp_path / "offline.tsv"
    assert main(["search", str(run), "--index", str(index_dir), "--config", str(cfg), "--backend", "numpy",
                 "-o", str(out)]) == 0  # fmt: skip
    with open(out, newline="") as fh:
        return {int(r["scan"]): r["peptide"] for r in csv.DictReader(fh, delimiter="\t")}


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("dev", DEV_RUNS, ids=lambda d: d.name)
async def test_replay_gives_the_offline_top1_and_loses_nothing(dev, data, dev_indexes, tmp_path):
    _, run_path = dev.paths(data)
    offline = _offline_top1(run_path, dev_indexes[dev.fastas], dev, tmp_path)
    engine = DatabaseTarget(load_index(dev_indexes[dev.fastas]), dev.search_config(), get_backend("numpy"))
    spectra = load_run(run_path)
    async with running(engine, serve_config(tmp_path)) as daemon:

        sent, col = await replay_through(daemon, [(dev.name, spectra)], rate=3000.0, idle_s=30, timeout_s=300)
    report = col.report(sent.ms2)
    print(f"\n{dev.name}: {report}")
    assert report.sent == len(offline) > 0
    assert report.lost == 0 and report.duplicates == 0
    online = {r["scan"]: r.get("peptide") or "" for r in col.results()}
    differ = {s: (offline[s], online[s]) for s in offline if offline[s] != online[s]}
    assert not differ, f"{len(differ)} spectra differ from the offline search, e.g. {list(differ.items())[:3]}"
