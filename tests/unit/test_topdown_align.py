"""Spectral alignment with unknown shifts (`rtsearch.scoring.topdown`): the docstring's grid by hand, random small
grids against every path enumerated, and a real E. coli protein's theoretical ions with a phosphorylation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rtsearch.config import ProteoformConfig
from rtsearch.database.fasta import read_fasta
from rtsearch.proteoforms.database import build_proteoforms
from rtsearch.scoring.topdown.align import NONE, align, align_many
from rtsearch.scoring.topdown.prm import WATER, prm_masses
from tests.conftest import data_dir


def test_the_docstring_grid() -> None:
    prefix = np.array([0.0, 100.0, 250.0, 400.0, 560.0])
    prm = np.array([0.0, 100.0, 250.0, 480.0, 640.0])  # +80 Da between P_2 and P_3
    assert align(prm, prefix, tolerance=0.02, max_shifts=0).scores == (NONE,)
    got = align(prm, prefix, tolerance=0.02, max_shifts=2)
    assert got.scores == (NONE, 3, 3) and got.best == (3, 1)
    unshifted = np.array([0.0, 100.0, 250.0, 400.0, 560.0])
    assert align(unshifted, prefix, tolerance=0.02, max_shifts=1).best == (3, 0)
    noisy = unshifted + np.array([0, 0.008, -0.008, 0.005, 0.0])  # shifts within the tolerance of each other
    assert align(noisy, prefix, tolerance=0.02, max_shifts=0).best == (3, 0)
    assert align(prm, prefix, tolerance=0.02, max_shifts=1, max_shift_mass=50.0).best == (NONE, -1)


def _brute(prm: np.ndarray, prefix: np.ndarray, tol: float, k: int, limit: float, known: tuple[float, ...] = (),
           max_known: int = 0) -> list[int]:  # fmt: skip
    """Every path from the origin to the end, enumerated: the best score with at most u unknown shifts and c
    known ones (a step that adds one of ``known`` to the shift), at u × (``max_known`` + 1) + c."""
    m, n = len(prm), len(prefix)
    fc = max_known + 1
    best = np.full((k + 1, fc), NONE)

    def walk(i: int, j: int, d: float, u: int, c: int, score: int) -> None:
        for i2, j2 in itertools.product(range(i + 1, m), range(j + 1, n)):
            end = i2 == m - 1
            if end != (j2 == n - 1):
                continue
            d2 = prm[i2] - prefix[j2]
            if abs(d2 - 0) > limit + (tol if end else 0):
                continue
            steps = [(u, c)] if abs(d2 - d) <= tol else [(u + 1, c)]  # kept, or an unknown shift
            if abs(d2 - d) > tol and any(abs(d2 - d - x) <= tol for x in known):
                steps.append((u, c + 1))  # or a known one
            for u2, c2 in steps:
                if u2 > k or c2 > max_known:
                    continue
                if end:
                    best[u2, c2] = max(best[u2, c2], score)
                else:
                    walk(i2, j2, d2, u2, c2, score + 1)

    walk(0, 0, 0.0, 0, 0, 0)
    return np.maximum.accumulate(np.maximum.accumulate(best, axis=0), axis=1).ravel().tolist()


@pytest.mark.parametrize("seed", range(40))
def test_random_grids_match_every_path_enumerated(seed: int) -> None:
    rng = np.random.default_rng(seed)
    prefix = np.concatenate([[0.0], np.cumsum(rng.choice([57.02, 71.04, 87.03, 99.07, 113.08, 128.09], 6))])
    shift = rng.choice([0.0, 15.99, 79.97])
    at = rng.integers(1, 6)
    truth = prefix + np.where(np.arange(7) >= at, shift, 0.0)
    keep = np.sort(rng.choice(np.arange(1, 6), rng.integers(2, 5), replace=False))
    noise = rng.uniform(50, 600, rng.integers(0, 3))
    prm = np.concatenate([[0.0], np.sort(np.concatenate([truth[keep], noise])), [truth[-1]]])
    for k in (0, 1, 2):
        got = align(prm, prefix, tolerance=0.02, max_shifts=k, max_shift_mass=200.0)
        assert list(got.scores) == _brute(prm, prefix, 0.02, k, k * 200.0 + 0.02), (seed, k)


@pytest.mark.parametrize("seed", range(40))
def test_known_shifts_on_random_grids(seed: int) -> None:
    """Random grids with up to two modifications, one of them known: the alignment's scores by unknown and known
    shift counts are those of every path enumerated under the same rules."""
    rng = np.random.default_rng(1000 + seed)
    prefix = np.concatenate([[0.0], np.cumsum(rng.choice([57.02, 71.04, 87.03, 99.07, 113.08, 128.09], 7))])
    truth = prefix.copy()
    for shift in (rng.choice([15.99, 79.97]), rng.choice([0.0, 42.01, 150.3, 15.99])):
        truth += np.where(np.arange(8) >= rng.integers(1, 7), shift, 0.0)
    keep = np.sort(rng.choice(np.arange(1, 7), rng.integers(2, 6), replace=False))
    noise = rng.uniform(50, 700, rng.integers(0, 3))
    prm = np.concatenate([[0.0], np.sort(np.concatenate([truth[keep], noise])), [truth[-1]]])
    known = (15.99491, 79.96633)
    for k, c in ((0, 1), (1, 1), (2, 1), (0, 2), (1, 2)):
        got = align(prm, prefix, tolerance=0.02, max_shifts=k, max_shift_mass=200.0, known=np.array(known),
                    max_known=c, known_reach=160.0)  # fmt: skip
        assert list(got.scores) == _brute(prm, prefix, 0.02, k, k * 200.0 + 160.0 + 0.02, known, c), (seed, k, c)


@pytest.mark.parametrize("seed", range(20))
def test_a_spectrums_candidates_aligned_at_once_score_as_each_alone(seed: int) -> None:
    """`align_many`: one spectrum's PRMs against several proteoforms of different lengths at once (one of them its
    own, the others sharing some of its masses), each row the scores of every path enumerated for that one alone:
    no bin, running maximum or end leaks from one proteoform into the next."""
    rng = np.random.default_rng(2000 + seed)
    residues = [57.02, 71.04, 87.03, 99.07, 113.08, 128.09]
    prefixes = [np.concatenate([[0.0], np.cumsum(rng.choice(residues, int(rng.integers(3, 8))))]) for _ in range(5)]
    truth = prefixes[0] + np.where(np.arange(len(prefixes[0])) >= rng.integers(1, len(prefixes[0])), 79.97, 0.0)
    prefixes[1] = prefixes[0][: len(prefixes[0]) - 1]  # a prefix of it: the same bins, its own end
    keep = np.sort(rng.choice(np.arange(1, len(truth) - 1), min(3, len(truth) - 2), replace=False))
    prm = np.concatenate([[0.0], np.sort(np.concatenate([truth[keep], rng.uniform(50, 600, 2)])), [truth[-1]]])
    known = np.array([15.99491, 79.96633])
    for k, c in ((1, 0), (2, 0), (1, 1)):
        options = {"known": known, "max_known": c, "known_reach": 80.0} if c else {}
        got = align_many(prm, prefixes, tolerance=0.02, max_shifts=k, max_shift_mass=200.0, **options)
        for row, prefix in zip(got.tolist(), prefixes, strict=True):
            want = _brute(prm, prefix, 0.02, k, k * 200.0 + (80.0 if c else 0.0) + 0.02, tuple(known) if c else (), c)
            assert row == want, (seed, k, c)


def test_a_known_shift_needs_no_unknown_one() -> None:
    prefix = np.array([0.0, 100.0, 250.0, 400.0, 560.0])
    prm = np.array([0.0, 100.0, 250.0, 479.96633, 639.96633])  # phosphate between P_2 and P_3
    assert align(prm, prefix, tolerance=0.02, max_shifts=0).scores == (NONE,)
    got = align(prm, prefix, tolerance=0.02, max_shifts=1, known=np.array([79.96633]), max_known=1, known_reach=80.0)
    assert got.scores == (NONE, 3, 3, 3)  # (unknown, known) = (0, 0), (0, 1), (1, 0), (1, 1)


def test_a_phosphorylated_ecoli_protein_aligns_with_one_shift() -> None:
    db = build_proteoforms(read_fasta(data_dir() / "topdown-flashapp-ecoli" / "example_database.fasta")[:1],
                           ProteoformConfig(decoys="none", n_term_forms=("none",)))  # fmt: skip
    prefix = db.prefix_of(0)[:41]  # the first 40 residues as a short proteoform
    n = len(prefix) - 1
    seq = db.sequence(0)[:40]
    site = next(i for i, aa in enumerate(seq) if aa in "ST" and i > 10)
    mod = np.where(np.arange(n + 1) > site, 79.966331, 0.0)  # phosphate on residue `site` (0-based)
    shifted = prefix + mod
    precursor = shifted[-1] + WATER
    b = shifted[1:n:2]  # every other b ion
    y = precursor - shifted[2:n:3]  # every third y ion (C-terminal residue sums + H2O)
    prm = prm_masses(np.concatenate([b, y]), precursor, "HCD")  # a PRM twice where a b and a y ion meet
    assert len(prm) > len(np.unique(prm))
    expected = len(np.unique(np.round(np.concatenate([b, precursor - WATER - (y - WATER)]), 6)))
    assert align(prm, prefix, tolerance=0.01, max_shifts=0).best == (NONE, -1)
    score, shifts = align(prm, prefix, tolerance=0.01, max_shifts=1).best
    assert shifts == 1 and score == expected  # every true PRM on the path; the complements of each ion are noise


def test_prm_masses_read_each_fragment_both_ways() -> None:
    got = prm_masses(np.array([200.0, 350.0]), 1000.0 + WATER, "HCD")
    assert got.tolist() == pytest.approx([0.0, 200.0 - 0.0, 1000.0 - (200.0 - WATER), 350.0,
                                          1000.0 - (350.0 - WATER), 1000.0][:1] + sorted(
        [200.0, 350.0, 1000.0 - 200.0 + WATER, 1000.0 - 350.0 + WATER]) + [1000.0])  # fmt: skip
    etd = prm_masses(np.array([200.0]), 1000.0 + WATER, "ETD")
    assert etd[1] == pytest.approx(200.0 - 17.026549101)
    merged = prm_masses(np.array([200.0, 200.004, 1000.0 + WATER - 200.0]), 1000.0 + WATER, merge_within=0.01)
    # 200, 200.004 and the y ion's complement 200 again: one PRM; their complements near 818.01: one
    assert merged.tolist() == pytest.approx([0.0, 200.0, 1000.0 - 200.0 + WATER, 1000.0], abs=0.01)


def test_near_by_hand() -> None:
    from rtsearch.scoring.topdown.prm import near

    ref = np.array([100.0, 200.0, 300.0])
    x = np.array([50.0, 99.99, 150.0, 200.015, 299.98, 300.03, 400.0])
    assert near(ref, x, 0.02).tolist() == [False, True, False, True, True, False, False]
    assert near(np.zeros(0), x, 1.0).tolist() == [False] * 7
    assert near(np.array([5.0]), np.array([4.99, 5.5]), 0.02).tolist() == [True, False]
