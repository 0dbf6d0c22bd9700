"""The columnar digest (`rtsearch.database.digest`) against the per-peptide reference (tests/digest_reference.py).

Same peptides in the same order, with the same terminal flags, missed cleavages, proteins and
decoy choices, on real FASTA files (the bundled E. coli database, BSA, the top-down E. coli
database) for every enzyme and specificity, with Met clipping and I = L.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rtsearch.config import DatabaseConfig
from rtsearch.database import digest as columnar
from rtsearch.database import seqkeys
from rtsearch.database.fasta import Protein, read_fasta
from tests.digest_reference import reference_decoy_sources, reference_digest

ECOLI = Path(columnar.__file__).parents[1] / "data" / "ecoli.fasta"


def _compare(proteins: list[Protein], cfg: DatabaseConfig) -> int:
    want = reference_digest(proteins, cfg)
    got = columnar.digest(proteins, cfg)
    got_d = got.to_dict(il=cfg.isoleucine_equals_leucine)
    assert list(got_d) == list(want)  # same peptides, same order
    for key, origin in want.items():
        assert got_d[key] == origin, key
    assert got.decoy_sources().tolist() == reference_decoy_sources(want, cfg)
    return len(want)


@pytest.fixture(scope="module")
def ecoli() -> list[Protein]:
    return read_fasta(ECOLI)


def test_bundled_ecoli_default_settings(ecoli: list[Protein]) -> None:
    # trypsin, 2 missed cleavages, 7-50 residues, initiator Met clipped: the index every test searches
    assert _compare(ecoli, DatabaseConfig()) > 250_000


@pytest.mark.parametrize("enzyme", ["trypsin/p", "lys-c", "lys-n", "asp-n", "chymotrypsin"])
def test_every_enzyme_on_real_proteins(ecoli: list[Protein], enzyme: str) -> None:
    cfg = DatabaseConfig(enzyme=enzyme, missed_cleavages=1, min_length=5, max_length=30)  # type: ignore[arg-type]
    assert _compare(ecoli[:600], cfg) > 5_000


def test_isoleucine_equals_leucine_and_no_clipping(ecoli: list[Protein]) -> None:
    cfg = DatabaseConfig(isoleucine_equals_leucine=True, clip_n_term_met=False, missed_cleavages=3)
    n_il = _compare(ecoli[:1000], cfg)
    n_plain = _compare(ecoli[:1000], DatabaseConfig(clip_n_term_met=False, missed_cleavages=3))
    assert n_il < n_plain  # peptides differing only by I/L are one


@pytest.mark.parametrize("enzyme", ["trypsin", "asp-n"])
def test_semi_specific_on_real_proteins(ecoli: list[Protein], enzyme: str, data: Path) -> None:
    proteins = read_fasta(data / "bsa-orbitrapxl" / "BSA.fasta") + ecoli[:150]
    cfg = DatabaseConfig(enzyme=enzyme, specificity="semi", missed_cleavages=1, min_length=6, max_length=25)  # type: ignore[arg-type]
    assert _compare(proteins, cfg) > 10_000


def test_nonspecific_on_real_proteins(data: Path) -> None:
    proteins = read_fasta(data / "topdown-flashapp-ecoli" / "example_database.fasta")[:40]
    assert _compare(proteins, DatabaseConfig(enzyme="nonspecific", min_length=6, max_length=14)) > 50_000


def test_first_hash_ties_fall_back_to_every_key(ecoli: list[Protein], monkeypatch: pytest.MonkeyPatch) -> None:
    # base 1 makes the first hash the sum of the residue codes: every anagram ties on it
    monkeypatch.setattr(seqkeys, "BASES", (1, seqkeys.BASES[1]))
    keys = columnar.digest(ecoli[:300], DatabaseConfig()).key
    assert np.unique(keys.h1).shape[0] < keys.h1.shape[0]  # ties were there to resolve
    assert _compare(ecoli[:300], DatabaseConfig()) > 10_000


def test_decoy_keys_are_the_keys_of_the_reversed_sequences(ecoli: list[Protein]) -> None:
    for enzyme in ("trypsin", "asp-n"):
        cfg = DatabaseConfig(enzyme=enzyme, missed_cleavages=1)  # type: ignore[arg-type]
        dig = columnar.digest(ecoli[:200], cfg)
        decoys = [columnar.decoy_sequence(s, cfg.enzyme) for s in dig.to_dict()]
        text = np.frombuffer("".join(decoys).encode("ascii"), dtype=np.uint8)
        ends = np.cumsum([len(d) for d in decoys])
        want = seqkeys.span_keys(seqkeys.hashers(seqkeys.key_codes(text, il=False)), ends - dig.length, ends)
        for field in ("h1", "h2", "n"):
            assert np.array_equal(getattr(dig.decoy_key, field), getattr(want, field)), (enzyme, field)
