"""Li et al.'s equal-work cut (`rtsearch.cluster.partition`): golden cuts by hand, owners at the edges, and the
balance of the dev runs' real indexes for 2, 4 and 8 pieces."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.cluster.partition import (
    LiveCuts,
    balance,
    bin_work,
    equal_work_cuts,
    owners,
    piece_work,
    serving_ranges,
    spectrum_masses,
)
from rtsearch.config import SearchConfig
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget


def test_cuts_by_hand() -> None:
    # work per 1-Da bin from 500 Da: 1 1 1 1 4 4 (12); halves at 6: after bin 4 (1+1+1+1+... = 4, +4 = 8): the
    # edge nearest 6 is 504 (4) or 505 (8) — equally near, the lower; thirds at 4 and 8: 504 and 505
    work = np.array([1, 1, 1, 1, 4, 4])
    assert equal_work_cuts(work, 500.0, 2).tolist() == [504.0]
    assert equal_work_cuts(work, 500.0, 3).tolist() == [504.0, 505.0]
    assert piece_work(work, 500.0, np.array([504.0, 505.0])).tolist() == [4.0, 4.0, 4.0]
    assert balance(np.array([4.0, 4.0, 4.0])) == 1.0 and balance(np.array([2.0, 6.0])) == 1.5
    assert equal_work_cuts(work, 500.0, 1).size == 0
    with pytest.raises(ValueError):
        equal_work_cuts(work, 500.0, 0)


def test_owners_and_masses() -> None:
    cuts = np.array([1000.0, 2000.0])
    assert owners(np.array([999.99, 1000.0, 1500.0, 2000.0, 3500.0]), cuts).tolist() == [0, 1, 1, 2, 2]
    m = spectrum_masses(np.array([500.0, 500.0, 500.0]), [(2,), (3, 2), ()])
    assert m == pytest.approx([997.98545, 1496.97817, 997.98545], abs=1e-4)  # (m/z − proton) × z; unknown: 2+
    work, start = bin_work(np.array([500.2, 500.9, 501.5, 503.0]))
    assert start == 500.0 and work.tolist() == [2, 1, 0, 1]


def test_the_dev_indexes_cut_evenly(dev_indexes) -> None:
    for folder in dev_indexes.values():
        target = DatabaseTarget.open(folder, SearchConfig(), get_backend("numpy"))
        work, start = bin_work(target.index.mass)
        for n in (2, 4, 8):
            cuts = equal_work_cuts(work, start, n)
            per = piece_work(work, start, cuts)
            assert per.sum() == len(target.index.mass) and balance(per) <= 1.10, (folder, n, per)


def test_live_cuts_follow_the_spectra() -> None:
    # candidates even over 1000–5000 Da; spectra only at 1000–2000 Da: Li's cuts leave 3 of 4 pieces idle, the
    # cuts made again from 2,000 spectra give each piece a quarter of their work
    work = np.full(4000, 100.0)
    rng = np.random.default_rng(3)
    masses = rng.uniform(1000.0, 2000.0, 4000)
    live = LiveCuts(work, 1000.0, 4, every=2000, prior=0.0)
    assert live.cuts.tolist() == [2000.0, 3000.0, 4000.0]
    assert not live.add(masses[:1999]) and live.add(masses[1999:2000])
    per = np.bincount(owners(masses[2000:], live.cuts), minlength=4)
    assert balance(per) <= 1.10 and live.cuts[-1] < 2000.0


def test_each_worker_serves_its_piece_widened_evenly_to_its_memory() -> None:
    size = np.ones(10)  # bytes per 1-Da bin from 100 Da: 10 in all
    # two pieces of 5; room for 7 each: widened by 1 on each side, shifted inside the range at its ends
    assert serving_ranges(size, 100.0, np.array([105.0]), 7.0) == [(-np.inf, 107.0), (103.0, np.inf)]
    # three pieces; the middle one (3 bytes) widened by 1.5 on each side
    got = serving_ranges(size, 100.0, np.array([103.0, 106.0]), 6.0)
    assert got == [(-np.inf, 106.0), (101.5, 107.5), (104.0, np.inf)]
    assert serving_ranges(size, 100.0, np.array([105.0]), 10.0) == [(-np.inf, np.inf)] * 2  # the whole fits
    with pytest.raises(ValueError, match="piece 0"):
        serving_ranges(size, 100.0, np.array([105.0]), 4.0)  # a piece alone is over the room
    # a worker holds half a Da of precursor window beyond what it serves, within its 7: it serves 1 Da less
    assert serving_ranges(size, 100.0, np.array([105.0]), 7.0, pad_da=0.5) == [(-np.inf, 106.5), (103.5, np.inf)]
    with pytest.raises(ValueError, match="piece 1"):  # 5 and the window on both sides: over a room of 5.5
        serving_ranges(size, 100.0, np.array([103.0, 108.0]), 5.5, pad_da=0.5)


def test_live_cuts_stay_where_both_workers_hold_the_target() -> None:
    work = np.ones(10)
    live = LiveCuts(work, 100.0, 2, every=10)
    assert live.cuts.tolist() == [105.0]
    live.hold([(-np.inf, 107.0), (103.0, np.inf)])
    live.add(np.full(10, 108.5))  # every spectrum at 108 Da: the cut would follow them there
    assert live.cuts.tolist() == [107.0]  # as far as worker 0 holds


def test_live_cuts_weigh_each_spectrum_by_the_candidates_it_meets() -> None:
    # candidates even per Da, spectra even over 1000–2000 Da, each meeting candidates in proportion to its mass (a
    # ppm window): the cut that halves their work is at sqrt((1000² + 2000²) / 2) = 1581 Da, not at 1500
    rng = np.random.default_rng(5)
    masses = rng.uniform(1000.0, 2000.0, 4000)
    met = masses * 0.04  # a 20 ppm window over 1,000 candidates a Da
    by_bin, by_work = (LiveCuts(np.full(4000, 1000.0), 1000.0, 2, every=4000, prior=0.0) for _ in range(2))
    assert by_bin.add(masses) and by_work.add(masses, met)
    assert by_bin.cuts[0] == pytest.approx(1500.0, abs=15.0)
    assert by_work.cuts[0] == pytest.approx(1581.0, abs=15.0)
    per_bin, per_work = (np.bincount(owners(masses, c.cuts), weights=met, minlength=2) for c in (by_bin, by_work))
    assert balance(per_work) <= 1.02 < 1.05 <= balance(per_bin)


def test_a_spectrum_costs_its_own_share_beside_its_candidates() -> None:
    from rtsearch.cluster.cost import MIN_PARTS, SpectrumCost

    cost = SpectrumCost()
    rng = np.random.default_rng(7)
    assert cost.work(np.array([10.0, 1000.0])).tolist() == [10.0, 1000.0]  # nothing seen: the candidates
    # parts of light spectra (100 candidates each) and heavy ones (1,000): 2 ms a part, 0.1 ms a spectrum and 1 µs
    # a candidate, so a light spectrum costs 0.2 ms and a heavy one 1.1 ms, not 10 times as much
    for i in range(MIN_PARTS + 10):
        n = int(rng.integers(5, 60))
        per = 100.0 if i % 2 else 1000.0
        cost.observe(n, n * per, 2e-3 + 1e-4 * n + 1e-6 * n * per)
    assert cost.per_spectrum == pytest.approx(1e-4, rel=1e-3) and cost.per_candidate == pytest.approx(1e-6, rel=1e-3)
    light, heavy = cost.work(np.array([100.0, 1000.0]))
    assert heavy / light == pytest.approx(1.1e-3 / 2e-4, rel=1e-3)
    cost.observe(0, 0.0, 1.0)  # nothing to learn from an empty part, or a bad time
    cost.observe(5, 500.0, float("nan"))
    assert cost.per_spectrum == pytest.approx(1e-4, rel=1e-3)


def test_a_fit_that_says_nothing_leaves_the_candidates() -> None:
    from rtsearch.cluster.cost import MIN_PARTS, SpectrumCost

    cost = SpectrumCost()
    for i in range(MIN_PARTS + 10):  # dearer with fewer candidates: b < 0, no cost model to trust
        n = 10 + i % 7
        cost.observe(n, n * (100.0 + 900.0 * (i % 2)), 1e-3 * n * (2.0 - (i % 2)))
    assert cost.per_spectrum == 0.0 and cost.per_candidate == 0.0
    assert cost.work(np.array([100.0, 1000.0])).tolist() == [100.0, 1000.0]
