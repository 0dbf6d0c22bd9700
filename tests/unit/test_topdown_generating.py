"""Generating-function p-values (`rtsearch.scoring.topdown.generating`): a two-residue alphabet worked out by hand,
a random protein's chance on a real spectrum against sampled proteins, and the search's E-values that use them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rtsearch.io.msalign import read_msalign
from rtsearch.scoring.topdown.evalue import LOG10_FLOOR
from rtsearch.scoring.topdown.generating import Question, Residues, log10_pvalues
from rtsearch.scoring.topdown.prm import prm_masses
from tests.conftest import data_dir

TWO = Residues(np.array([2.0, 3.0]), np.array([0.5, 0.5]))


def test_two_residues_by_hand() -> None:
    # proteins of mass 10 from residues of 2 and 3 Da, each drawn with probability 1/2: 22222 (1/32) and the six
    # orders of 2233 (1/16 each), 13/32 in all. Prefixes 4 and 6 marked: 22222 passes both (2, 4, 6, 8), 2233 only 4
    # (2, 4, 7) and 3322 only 6 (3, 6, 8), the other four neither.
    def p(marks: list[float], score: int) -> float:
        return 10 ** log10_pvalues([Question(np.array(marks), 0.1, 10.0, 0.1, 0.0, score)], TWO)[0]

    assert p([4.0, 6.0], 2) == pytest.approx(1 / 13, rel=1e-12)
    assert p([4.0, 6.0], 1) == pytest.approx(5 / 13, rel=1e-12)  # (1/32 + 2/16) / (13/32)
    # a mark at 5: 2323, 2332, 3223, 3232 (4/16) of 13/32
    assert p([5.0], 1) == pytest.approx(8 / 13, rel=1e-12)
    # the end (10) is not a prefix: no protein scores on it; a score of 0 is no evidence; a start of 3 (an N-terminal
    # modification) leaves proteins of 7 Da: 223, 232, 322, of which two pass 5
    assert log10_pvalues([Question(np.array([10.0]), 0.1, 10.0, 0.1, 0.0, 1)], TWO)[0] == LOG10_FLOOR
    assert p([5.0], 0) == 1.0
    assert 10 ** log10_pvalues([Question(np.array([5.0]), 0.1, 10.0, 0.1, 3.0, 1)], TWO)[0] == pytest.approx(2 / 3)


@pytest.fixture(scope="module")
def spectrum_marks() -> np.ndarray:
    """The inner PRMs below 2,000 Da of the FLASHApp run's first spectrum with more than 30 of them."""
    for sp in read_msalign(data_dir() / "topdown-flashapp-ecoli" / "toppic_ms2.msalign"):
        if sp.problem:
            continue
        prm = prm_masses(sp.mass, sp.precursors[0].mass, sp.activation, merge_within=0.02)[1:-1]
        if np.sum(prm < 2000.0) > 30:
            return prm[prm < 2000.0]
    raise AssertionError("no such spectrum")


def test_a_real_spectrum_against_sampled_proteins(spectrum_marks: np.ndarray) -> None:
    # random proteins of E. coli's twenty residues (equal shares here) whose mass comes within 0.02 Da of 2,000:
    # the share with at least k prefixes on the spectrum's PRMs, against the dynamic programme's
    masses = np.array([57.02146, 71.03711, 87.03203, 97.05276, 99.06841, 101.04768, 103.00919, 113.08406, 114.04293,
                       115.02694, 128.05858, 128.09496, 129.04259, 131.04049, 137.05891, 147.06841, 156.10111,
                       163.06333, 186.07931])  # fmt: skip
    freq = np.full(19, 1.0 / 20)
    freq[7] = 2.0 / 20  # I and L
    residues = Residues(masses, freq)
    rng = np.random.default_rng(7)
    tol, mass = 0.02, 2000.0
    scores = []
    for _ in range(12):
        prefix = np.cumsum(rng.choice(masses, size=(400_000, 30), p=freq), axis=1)
        row, at = np.nonzero(np.abs(prefix - mass) <= tol)
        for r, a in zip(row.tolist(), at.tolist(), strict=True):
            inner = prefix[r, :a]
            d = np.abs(inner[:, None] - spectrum_marks[None, :]).min(axis=1)
            scores.append(int(np.sum(d <= tol)))
    scores = np.array(scores)
    assert scores.shape[0] > 1000
    dp = 10 ** log10_pvalues([Question(spectrum_marks, tol, mass, tol, 0.0, k) for k in (1, 2, 3)], residues)
    for k in (1, 2):  # measured: 0.0355 against 0.0391 ± 0.0026 sampled, 0.0020 against 0.0023 ± 0.0006
        sampled = float(np.mean(scores >= k))
        sigma = math.sqrt(sampled * (1 - sampled) / scores.shape[0])
        assert sampled > 0 and abs(dp[k - 1] - sampled) < 4 * sigma + 0.001, (k, dp[k - 1], sampled)
    assert 0.0 < dp[2] < dp[1] < dp[0] and dp[2] < 10 / scores.shape[0]  # none of ~5,700 sampled scored 3
