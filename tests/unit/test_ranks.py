"""Ranks below the best (`[search] ranks`): each spectrum's next peptides, their features, and the best unchanged.

A hand-made case fixes the order (ties by the lower peptide number) and ``delta_score``; the bundled E. coli run
checks that asking for more ranks leaves every best match as it was, and the relations between ranks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import ConfigError, load_config, parse_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.candidates import Queries
from rtsearch.scoring.database.features import FEATURES, best_matches
from rtsearch.scoring.database.matching import MatchStats
from rtsearch.search.database import DatabaseTarget

_H, _DELTA = FEATURES.index("hyperscore"), FEATURES.index("delta_score")


def _stats(hyper: np.ndarray) -> MatchStats:
    zeros = np.zeros_like(hyper)
    return MatchStats(hyper, zeros, zeros, zeros.astype(np.int64), zeros.astype(np.int64), zeros,
                      zeros.astype(np.int64), zeros, zeros, zeros)  # fmt: skip


def test_ranks_by_hand(demo_index) -> None:
    # spectrum 0: two queries (charges 2 and 3) sharing peptide 9; spectrum 1: one candidate; spectrum 2: none
    cand = np.array([[5, 9, 11], [9, 7, -1], [4, -1, -1]])
    hyper = np.array([[10.0, 8.0, 10.0], [12.0, 3.0, 0.0], [6.0, 0.0, 0.0]])
    mass = np.asarray(demo_index.mass[[9, 9, 4]], np.float64)
    queries = Queries(np.array([0, 0, 1]), np.array([2, 3, 2]), mass, np.zeros(3, np.int64), np.full(3, 20))
    cfg = load_config(bundled(TOML)).search
    ranks = best_matches(
        demo_index, queries, cand, np.zeros((3, 3), np.int32), _stats(hyper), 3, primary="hyperscore",
        precursor_tolerance=cfg.precursor_tolerance, isotope_errors=cfg.isotope_errors,
        match_probability=np.full(3, 0.1), max_fragment_charge=2, ranks=4,
    )  # fmt: skip
    assert [r.match.tolist() for r in ranks] == [[9, 4, -1], [5, -1, -1], [11, -1, -1], [7, -1, -1]]
    assert [r.charge[0] for r in ranks] == [3, 2, 2, 3]  # the query each rank's best came from
    # 12 leads 10 (peptide 5 before 11 on the tie), 10 leads 10, then 10 leads 3, and 3 stands alone
    assert [r.features[0, _DELTA] for r in ranks] == [2.0, 0.0, 7.0, 3.0]
    assert ranks[0].features[1, _DELTA] == 6.0 and ranks[0].features[1, _H] == 6.0


@pytest.fixture(scope="module")
def scored(demo_index) -> tuple:
    cfg = load_config(bundled(TOML)).search
    spectra = SpectraBatch.of(list(read_spectra(bundled(RUN))))
    one = DatabaseTarget(demo_index, cfg, get_backend("numpy")).score(spectra)
    three = DatabaseTarget(demo_index, dataclasses.replace(cfg, ranks=3), get_backend("numpy")).score(spectra)
    return one, three


def test_more_ranks_leave_the_best_as_it_was(scored) -> None:
    one, three = scored
    assert one.lower == [] and len(three.lower) == 2
    for f in dataclasses.fields(one.best):
        np.testing.assert_array_equal(getattr(one.best, f.name), getattr(three.best, f.name))


def test_lower_ranks_are_other_peptides_scored_lower(scored) -> None:
    _, three = scored
    ranks = [three.best, *three.lower]
    match = np.stack([r.match for r in ranks])
    hyper = np.stack([r.features[:, _H] for r in ranks])
    assert (match[1] >= 0).sum() > 0.8 * (match[0] >= 0).sum() > 50
    for r in (1, 2):
        has = match[r] >= 0
        assert np.all(match[r - 1][has] >= 0)  # a rank only below a filled one
        assert np.all(hyper[r][has] <= hyper[r - 1][has])
        assert np.all(match[r][has] != match[r - 1][has]) and np.all(match[r][has] != match[0][has])
        # rank r - 1 leads the next by exactly rank r's score
        lead = ranks[r - 1].features[has, _DELTA]
        np.testing.assert_allclose(lead, hyper[r - 1][has] - hyper[r][has], rtol=1e-12)


def test_ranks_are_checked() -> None:
    assert parse_config({"search": {"ranks": 10}}).search.ranks == 10
    for bad in (0, 11):
        with pytest.raises(ConfigError, match="ranks must be between 1 and 10"):
            parse_config({"search": {"ranks": bad}})
    with pytest.raises(ConfigError, match="between 1 and 5"):
        parse_config({"search": {"ranks": 6, "candidates": 5}})


def test_ranks_below_the_first_are_a_database_search_s(tmp_path, capsys) -> None:
    from rtsearch.cli import main

    run = str(bundled(RUN))
    code = main(["search", run, "--library", str(tmp_path / "lib"), "--ranks", "2", "-o", str(tmp_path / "r.tsv")])
    assert code == 2 and "--ranks applies to database search (--index)" in capsys.readouterr().err
    code = main(["search", run, "--index", str(tmp_path / "idx"), "--ranks", "11", "-o", str(tmp_path / "r.tsv")])
    assert code == 2 and "ranks must be between 1 and 10" in capsys.readouterr().err


def test_one_query_a_spectrum_reduces_as_the_general_layout_does() -> None:
    """`_Groups.reduce` takes a shortcut when every spectrum has one query (its charge given: the usual batch); each
    reduction must give the general [G, C] layout's values and dtype, bool sums (counts) included."""
    from rtsearch.scoring.database import features

    g = features._Groups(np.array([0, 3, 4, 9]))  # four spectra, a query each
    assert g.width == 1
    rng = np.random.default_rng(7)
    for values, fill, how in [(rng.normal(size=4), -np.inf, "max"), (np.array([5, 2, 9, 1]), 2**62, "min"),
                              (np.array([True, False, True, True]), 0, "sum"), (np.array([-0.0, np.nan, 1.5, 2.0]),
                              0.0, "sum")]:  # fmt: skip
        laid = np.full((4, 1), fill, dtype=values.dtype)
        laid[g.group, g.pos] = values
        want = getattr(laid, how)(axis=1)
        got = g.reduce(values, fill, how)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
