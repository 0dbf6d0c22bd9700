"""Partition's plan on a real run (`rtsearch.cluster.pieces`): a spectrum goes whole to the worker of its mass when
that worker's slice reaches every query of it, and is split over the owners of its queries otherwise; either way
the door's answer is, spectrum for spectrum, the one engine of the whole target gives (match, charge, features,
names)."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cluster.partition import spectrum_masses
from rtsearch.cluster.pieces import Pieces
from rtsearch.cluster.serve import partition_cuts
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import named
from tests.devruns import DEV_RUNS

DEMO = next(d for d in DEV_RUNS if d.name == "demo")  # 3 Da windows, spectra of two or three charges
# the demo's spectra searched against the smallest dev index (E. coli: half the yeast index's fragments, which a
# slice sorts again): the answers are compared with one engine's, right or wrong
ECOLI = next(d for d in DEV_RUNS if d.name == "Ecoli_MS2_small").fastas


@pytest.mark.parametrize("held", ["whole", "slices"])
def test_pieces_answer_as_one_engine(held: str, data, dev_indexes) -> None:
    whole = DatabaseTarget.open(dev_indexes[ECOLI], DEMO.search_config(), get_backend("numpy"))
    _, run = DEMO.paths(data)
    batch = SpectraBatch.of([s for s in read_spectra(run) if s.ms_level == 2])
    cuts = partition_cuts(whole, 2)
    if held == "whole":
        serves = [(-np.inf, np.inf)] * 2
    else:  # cut at the run's median mass (Li's cut by the index leaves this run's spectra nearly all in piece 0),
        # each worker holding its piece and 50 Da beyond: a spectrum's 3+ query past that is split
        cut = float(np.median(spectrum_masses(batch.precursor_mz, batch.charges)))
        cuts.cuts = np.array([cut])
        serves = [(-np.inf, cut + 50.0), (cut - 50.0, np.inf)]
    # a worker holding the whole target holds what its whole-range slice would (peptides numbered from 0)
    slices = [whole, whole] if held == "whole" else [whole.reopen_slice(own, "numpy")() for own in serves]
    pieces = Pieces(whole, cuts, serves, [None, None])  # type: ignore[list-item]  # opened here, not by workers
    plan = pieces.route(batch)

    assert sorted(np.concatenate([p.rows for p in plan if p.whole]).tolist() +
                  np.unique(np.concatenate([p.rows for p in plan if not p.whole] or [[]])).tolist()) == list(
                      range(len(batch)))  # every spectrum in one way exactly  # fmt: skip
    split = {int(r) for p in plan if not p.whole for r in p.rows}
    if held == "whole":  # every worker holds the target: none split, each whole to the piece of its first charge
        assert not split and {p.piece for p in plan} == {0, 1}
        home = np.searchsorted(cuts.cuts, spectrum_masses(batch.precursor_mz, batch.charges), side="right")
        assert all((home[p.rows] == p.piece).all() for p in plan)
    else:  # slices: those with a charge beyond their worker's slice are split, the rest whole
        assert 0 < len(split) < len(batch) and any(p.whole for p in plan), len(split)
    parts = []
    for p in plan:
        sub, target = batch.take(p.rows), slices[p.piece]
        parts.append((p, named(target, target.score(sub)) if p.whole else target.score_queries(sub, p.own)))
    got = pieces.finish(batch, parts)
    want = named(whole, whole.score(batch))

    assert got.scan.tolist() == want.scan.tolist() and got.reason == want.reason
    assert got.best.match.tolist() == want.best.match.tolist() and got.best.charge.tolist() == want.best.charge.tolist()
    assert np.allclose(got.best.features, want.best.features, rtol=1e-9, equal_nan=True)
    assert got.names is not None and want.names is not None and got.names.peptides == want.names.peptides
    assert got.names.proteins == want.names.proteins and (want.best.match >= 0).sum() > 100


def test_cuts_held_by_memory_away_from_the_spectra_are_told_once(data, dev_indexes, caplog) -> None:
    whole = DatabaseTarget.open(dev_indexes[ECOLI], DEMO.search_config(), get_backend("numpy"))
    _, run = DEMO.paths(data)
    batch = SpectraBatch.of([s for s in read_spectra(run) if s.ms_level == 2])
    masses = spectrum_masses(batch.precursor_mz, batch.charges)
    cuts = partition_cuts(whole, 2)
    cuts.every = len(batch)  # cut again after one pass of the run
    low = float(np.quantile(masses, 0.9))  # piece 1's worker can serve no lower: 9 in 10 spectra are piece 0's
    pieces = Pieces(whole, cuts, [(-np.inf, np.inf), (low, np.inf)], [None, None])  # type: ignore[list-item]
    with caplog.at_level("WARNING", logger="rtsearch.cluster.pieces"):
        pieces.route(batch)
        pieces.route(batch)
    told = [r.getMessage() for r in caplog.records if "memory holds the cuts" in r.getMessage()]
    assert len(told) == 1 and f"[{round(low)}" in told[0], told
    assert cuts.cuts[0] == low and cuts.wanted[0] < low  # held at piece 1's lowest, the spectra wanting it lower


def test_cuts_weigh_the_spectra_by_what_they_cost_their_workers(data, dev_indexes) -> None:
    whole = DatabaseTarget.open(dev_indexes[ECOLI], DEMO.search_config(), get_backend("numpy"))
    _, run = DEMO.paths(data)
    batch = SpectraBatch.of([s for s in read_spectra(run) if s.ms_level == 2])
    answers = named(whole, whole.score(batch))
    pieces = Pieces(whole, partition_cuts(whole, 2), [(-np.inf, np.inf)] * 2, [None, None])  # type: ignore[list-item]
    given: list[np.ndarray] = []
    add = pieces.cuts.add
    pieces.cuts.add = lambda masses, work: given.append(np.asarray(work)) or add(masses, work)  # type: ignore[method-assign]
    for _ in range(4):  # the run four times in batches of 10; each part's worker time: 1 ms, and 0.2 ms a spectrum
        for i in range(0, len(batch), 10):  # whatever its candidates
            rows = np.arange(i, min(i + 10, len(batch)))
            parts = []
            for p in pieces.route(batch.take(rows)):
                a = answers.take(rows[p.rows])
                a.stages["scoring"] = 1e-3 + 2e-4 * len(p.rows)
                parts.append((p, a))
            pieces.finish(batch.take(rows), parts)
    assert pieces.cost.per_spectrum == pytest.approx(2e-4, rel=1e-3) and pieces.cost.per_candidate < 1e-9
    first, last = given[0], given[-1]  # the first batch weighed by its candidates; the last alike, as they cost
    assert first.std() / first.mean() > 0.3 and last.std() / last.mean() < 0.01, (first, last)
