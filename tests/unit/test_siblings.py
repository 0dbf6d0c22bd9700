"""Sibling evidence (`rtsearch.scoring.database.siblings`): golden values counted by hand on a tiny index."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from rtsearch.config import DatabaseConfig
from rtsearch.database.build import build_index
from rtsearch.database.index import PeptideIndex
from rtsearch.scoring.database.siblings import sibling_evidence


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> PeptideIndex:
    fasta = Path(tmp_path_factory.mktemp("sib")) / "tiny.fasta"
    # trypsin, no missed cleavage: P1 = LLLLAK | GGGGDR | SACMPEK, P2 = WWWWNK | SACMPEK (shared), P3 = HHHHYR
    fasta.write_text(">P1 a\nLLLLAKGGGGDRSACMPEK\n>P2 b\nWWWWNKSACMPEK\n>P3 c\nHHHHYR\n", encoding="utf-8")
    cfg = DatabaseConfig(min_length=4, min_mass=100.0, missed_cleavages=0, variable_mods=())
    return build_index([fasta], cfg)


def _id(index: PeptideIndex, seq: str, decoy: bool = False) -> int:
    hits = [i for i in range(len(index))
            if index.sequence(i) == seq and bool(index.is_decoy(np.array([i]))[0]) == decoy]  # fmt: skip
    assert len(hits) == 1, (seq, hits)
    return hits[0]


def test_the_most_other_counted_psms_on_one_protein(index: PeptideIndex) -> None:
    pep = {s: _id(index, s) for s in ("LLLLAK", "GGGGDR", "SACMPEK", "WWWWNK", "HHHHYR")}
    # PSMs: LLLLAK twice, GGGGDR, SACMPEK (P1 and P2), WWWWNK, HHHHYR; all counted but HHHHYR
    ids = np.array([pep["LLLLAK"], pep["LLLLAK"], pep["GGGGDR"], pep["SACMPEK"], pep["WWWWNK"], pep["HHHHYR"]])
    counted = np.array([True, True, True, True, True, False])
    got = sibling_evidence(index, ids, counted)
    # P1 holds 4 counted PSMs (LLLLAK x2, GGGGDR, SACMPEK), P2 two (SACMPEK, WWWWNK), P3 none
    want = [3, 3, 3, 3, 1, 0]  # on P1: the other three; SACMPEK: max(P1 3, P2 1); WWWWNK: P2's other one
    np.testing.assert_allclose(got, np.log1p(want))
    # not counted: nothing counts it, nor does it count itself
    alone = sibling_evidence(index, ids, np.zeros(len(ids), bool))
    np.testing.assert_array_equal(alone, np.zeros(len(ids)))


def test_a_decoy_protein_is_apart_and_counted_alike(index: PeptideIndex) -> None:
    """A decoy's siblings are the counted PSMs of its own decoy protein, worked out as a target's are."""
    target = _id(index, "HHHHYR")
    decoys = [i for i in range(len(index)) if index.is_decoy(np.array([i]))[0]
              and index.protein_accessions(i) == [index.params.decoy_prefix + index.proteins[2]]]  # fmt: skip
    assert len(decoys) == 1  # HHHHYR's decoy
    ids = np.array([target, target, decoys[0], decoys[0], decoys[0]])
    got = sibling_evidence(index, ids, np.ones(5, bool))
    np.testing.assert_allclose(got, [math.log(2), math.log(2), math.log(3), math.log(3), math.log(3)])
    assert sibling_evidence(index, np.zeros(0, np.int64), np.zeros(0, bool)).shape == (0,)
