"""Tests for protein digestion (`rtsearch.database.digest`) and FASTA reading (`rtsearch.database.fasta`).

Expected peptides are written out by hand for a small protein (positions in
comments) or enumerated by a brute-force digest written here: every substring
whose ends sit at cleavage sites (both for full, at least one for semi
specificity) with at most ``missed_cleavages`` sites inside.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rtsearch.config import DatabaseConfig
from rtsearch.database.digest import PeptideOrigin, decoy_sequence, digest
from rtsearch.database.fasta import Protein, read_fasta, read_fastas
from rtsearch.errors import InputError

# M0 A1 E2 K3 P4 L5 L6 R7 G8 H9 I10 K11 W12 W13 D14 D15 R16 A17 A18 C19 E20
# trypsin cuts after R7 (-> 8), K11 (-> 12), R16 (-> 17); not after K3 (P follows).
PROT = "MAEKPLLRGHIKWWDDRAACE"
PIECES = ["MAEKPLLR", "GHIK", "WWDDR", "AACE"]


def _origins(proteins: list[Protein], cfg: DatabaseConfig, **kw: object) -> dict[str, PeptideOrigin]:
    """The digest as ``{sequence (I as L when configured): PeptideOrigin}``."""
    return digest(proteins, cfg, **kw).to_dict(il=cfg.isoleucine_equals_leucine)  # type: ignore[arg-type]


def _cfg(**kw: object) -> DatabaseConfig:
    base: dict[str, object] = {"min_length": 1, "max_length": 50, "clip_n_term_met": False}
    base.update(kw)
    return DatabaseConfig(**base)  # type: ignore[arg-type]


def _peps(seq: str, **kw: object) -> set[str]:
    return set(_origins([Protein("p", seq)], _cfg(**kw)))


# --------------------------------------------------------------------------- trypsin


def test_trypsin_no_missed_cleavage() -> None:
    assert _peps(PROT, missed_cleavages=0) == set(PIECES)


def test_trypsin_missed_cleavages() -> None:
    one = set(PIECES) | {"MAEKPLLRGHIK", "GHIKWWDDR", "WWDDRAACE"}
    two = one | {"MAEKPLLRGHIKWWDDR", "GHIKWWDDRAACE"}
    assert _peps(PROT, missed_cleavages=1) == one
    assert _peps(PROT, missed_cleavages=2) == two
    # 3 missed cleavages reach the whole protein
    assert _peps(PROT, missed_cleavages=3) == two | {PROT}


def test_missed_cleavage_counts_recorded() -> None:
    got = _origins([Protein("p", PROT)], _cfg(missed_cleavages=2))
    assert got["GHIK"].missed_cleavages == 0
    assert got["GHIKWWDDR"].missed_cleavages == 1
    assert got["MAEKPLLRGHIKWWDDR"].missed_cleavages == 2  # KP is not a site: K3 is not missed


def test_terminal_flags() -> None:
    got = _origins([Protein("p", PROT)], _cfg(missed_cleavages=1))
    assert got["MAEKPLLR"].protein_n_term and not got["MAEKPLLR"].protein_c_term
    assert got["WWDDRAACE"].protein_c_term and not got["WWDDRAACE"].protein_n_term
    assert not got["GHIK"].protein_n_term and not got["GHIK"].protein_c_term


def test_length_bounds() -> None:
    # lengths: MAEKPLLR 8, GHIK 4, WWDDR 5, AACE 4, MAEKPLLRGHIK 12, GHIKWWDDR 9, WWDDRAACE 9
    assert _peps(PROT, missed_cleavages=1, min_length=5, max_length=9) == {
        "MAEKPLLR", "WWDDR", "GHIKWWDDR", "WWDDRAACE",
    }  # fmt: skip
    assert _peps(PROT, missed_cleavages=1, min_length=9, max_length=9) == {"GHIKWWDDR", "WWDDRAACE"}
    assert _peps(PROT, missed_cleavages=0, min_length=20, max_length=50) == set()


def test_met_clipping() -> None:
    on = _origins([Protein("p", PROT)], _cfg(missed_cleavages=1, clip_n_term_met=True))
    off = _peps(PROT, missed_cleavages=1)
    # clipping adds the peptides starting after the initiator Met, and keeps the others
    assert set(on) == off | {"AEKPLLR", "AEKPLLRGHIK"}
    assert on["AEKPLLR"].protein_n_term
    assert on["AEKPLLRGHIK"].protein_n_term
    assert on["MAEKPLLR"].protein_n_term
    assert on["AEKPLLR"].missed_cleavages == 0
    assert on["AEKPLLRGHIK"].missed_cleavages == 1
    # no Met, nothing to clip
    assert _peps("AAKGGGR", clip_n_term_met=True, missed_cleavages=0) == {"AAK", "GGGR"}


def test_clipped_peptide_respects_length_bounds() -> None:
    # MAEKPLLR is 8 long, AEKPLLR 7: a minimum of 8 keeps only the unclipped one
    got = _origins([Protein("p", PROT)], _cfg(missed_cleavages=0, min_length=8, clip_n_term_met=True))
    assert set(got) == {"MAEKPLLR"}


# --------------------------------------------------------------------------- other enzymes


@pytest.mark.parametrize(
    ("enzyme", "pieces"),
    [
        # trypsin/p also cuts K3|P4
        ("trypsin/p", ["MAEK", "PLLR", "GHIK", "WWDDR", "AACE"]),
        # Lys-C after K3 and K11
        ("lys-c", ["MAEK", "PLLRGHIK", "WWDDRAACE"]),
        # Lys-N before K3 and K11
        ("lys-n", ["MAE", "KPLLRGHI", "KWWDDRAACE"]),
        # Asp-N before D14 and D15
        ("asp-n", ["MAEKPLLRGHIKWW", "D", "DRAACE"]),
        # chymotrypsin after L5, L6, W12, W13 (none before P)
        ("chymotrypsin", ["MAEKPL", "L", "RGHIKW", "W", "DDRAACE"]),
    ],
)
def test_enzymes(enzyme: str, pieces: list[str]) -> None:
    assert "".join(pieces) == PROT
    assert _peps(PROT, enzyme=enzyme, missed_cleavages=0) == set(pieces)
    joined = {pieces[i] + pieces[i + 1] for i in range(len(pieces) - 1)}
    assert _peps(PROT, enzyme=enzyme, missed_cleavages=1) == set(pieces) | joined


def test_chymotrypsin_not_before_proline() -> None:
    # F2 is followed by P: no cut; W6 is followed by A: cut
    assert _peps("AAFPAAWAA", enzyme="chymotrypsin", missed_cleavages=0) == {"AAFPAAW", "AA"}


# --------------------------------------------------------------------------- semi and nonspecific

SITES = {
    "trypsin": r"(?<=[KR])(?!P)",
    "lys-c": r"(?<=K)",
    "asp-n": r"(?=D)",
}


def _brute(seq: str, enzyme: str, mc: int, lo: int, hi: int, semi: bool) -> dict[str, int]:
    """Every substring with cleavage-site ends, and its missed cleavages (fewest over occurrences)."""
    sites = {0, len(seq)} | {m.start() for m in re.finditer(SITES[enzyme], seq)}
    inner = sites - {0, len(seq)}
    out: dict[str, int] = {}
    for i in range(len(seq)):
        for j in range(i + 1, len(seq) + 1):
            if not lo <= j - i <= hi:
                continue
            ends = (i in sites) + (j in sites)
            if ends < (1 if semi else 2):
                continue
            missed = sum(1 for s in inner if i < s < j)
            if missed > mc:
                continue
            pep = seq[i:j]
            out[pep] = min(out.get(pep, missed), missed)
    return out


SEMI_PROTEINS = [
    "AAGKLLSTVRPEEWKQNDDFGHK",
    "KRKRGGSTAAPLKDRWW",
    "ADDEFGHKLNPQRSTVWYCCCD",
]


@pytest.mark.parametrize("seq", SEMI_PROTEINS)
@pytest.mark.parametrize("enzyme", ["trypsin", "lys-c", "asp-n"])
@pytest.mark.parametrize(("mc", "lo", "hi"), [(0, 3, 8), (1, 4, 12), (2, 1, 30)])
def test_semi_specific_matches_brute_force(seq: str, enzyme: str, mc: int, lo: int, hi: int) -> None:
    got = _origins(
        [Protein("p", seq)],
        _cfg(enzyme=enzyme, specificity="semi", missed_cleavages=mc, min_length=lo, max_length=hi),
    )
    want = _brute(seq, enzyme, mc, lo, hi, semi=True)
    assert set(got) == set(want)
    assert {k: v.missed_cleavages for k, v in got.items()} == want


@pytest.mark.parametrize("seq", SEMI_PROTEINS)
@pytest.mark.parametrize("enzyme", ["trypsin", "lys-c", "asp-n"])
def test_full_specific_matches_brute_force(seq: str, enzyme: str) -> None:
    got = _origins([Protein("p", seq)], _cfg(enzyme=enzyme, missed_cleavages=2, min_length=2, max_length=20))
    want = _brute(seq, enzyme, 2, 2, 20, semi=False)
    assert {k: v.missed_cleavages for k, v in got.items()} == want


def test_semi_is_superset_of_full() -> None:
    seq = SEMI_PROTEINS[0]
    full = _peps(seq, missed_cleavages=1, min_length=3, max_length=15)
    semi = _peps(seq, specificity="semi", missed_cleavages=1, min_length=3, max_length=15)
    assert full < semi
    # a semi peptide: tryptic N-term (after K3), non-tryptic C-term
    assert "LLST" in semi and "LLST" not in full


def test_nonspecific_all_substrings() -> None:
    # 20 distinct letters: every substring is distinct, so the count is
    # sum over n = 3..6 of (20 - n + 1) = 18 + 17 + 16 + 15 = 66
    seq = "ACDEFGHIKLMNPQRSTVWY"
    got = _peps(seq, enzyme="nonspecific", min_length=3, max_length=6)
    assert len(got) == 66
    assert got == {seq[i : i + n] for n in range(3, 7) for i in range(len(seq) - n + 1)}


def test_nonspecific_with_met_clipping_adds_nothing_new() -> None:
    seq = "MACDEFGHIKLNPQRSTVWY"  # 20 distinct letters, starts with M
    got = _peps(seq, enzyme="nonspecific", min_length=5, max_length=7, clip_n_term_met=True)
    # n = 5, 6, 7: 16 + 15 + 14 = 45
    assert len(got) == 45


# --------------------------------------------------------------------------- ambiguous, shared, I/L


def test_ambiguous_residues_skipped() -> None:
    seq = "AAAAAAKBBBBBBKCCCCCCKJJJRXGGGGZK"
    got = _peps(seq, missed_cleavages=1)
    # pieces AAAAAAK | BBBBBBK | CCCCCCK | JJJR | XGGGGZK: every joined pair holds B, J, X or Z
    assert got == {"AAAAAAK", "CCCCCCK"}


def test_fasta_keeps_ambiguous_residues(tmp_path: Path) -> None:
    p = tmp_path / "amb.fasta"
    p.write_text(">P1\nAAAAAAKBBBBBBKXZJK\n", encoding="utf-8")
    assert read_fasta(p)[0].sequence == "AAAAAAKBBBBBBKXZJK"


def test_shared_peptides_stored_once() -> None:
    proteins = [
        Protein("P1", "AAAAAAKCCCCCCR"),
        Protein("P2", "DDDDDDKCCCCCCR"),
        Protein("P3", "CCCCCCRGGGGGGKCCCCCCR"),  # the shared peptide twice in one protein
    ]
    got = _origins(proteins, _cfg(missed_cleavages=0))
    assert set(got) == {"AAAAAAK", "DDDDDDK", "CCCCCCR", "GGGGGGK"}
    assert got["CCCCCCR"].proteins == [0, 1, 2]
    assert got["AAAAAAK"].proteins == [0]
    assert got["GGGGGGK"].proteins == [2]
    # C-terminal in P1 and P2, N-terminal in P3: the flags are set from any occurrence
    assert got["CCCCCCR"].protein_c_term and got["CCCCCCR"].protein_n_term


def test_isoleucine_equals_leucine() -> None:
    proteins = [Protein("P1", "SAMPLEIKGGGR"), Protein("P2", "SAMPLELKGGGR")]
    apart = _origins(proteins, _cfg(missed_cleavages=0))
    assert {"SAMPLEIK", "SAMPLELK"} <= set(apart)
    assert apart["SAMPLEIK"].proteins == [0]
    assert apart["SAMPLELK"].proteins == [1]
    merged = _origins(proteins, _cfg(missed_cleavages=0, isoleucine_equals_leucine=True))
    assert set(merged) == {"SAMPLELK", "GGGR"}
    assert merged["SAMPLELK"].proteins == [0, 1]
    assert merged["SAMPLELK"].sequence == "SAMPLEIK"  # the first protein's spelling is kept


def test_progress_reports_every_protein() -> None:
    seen: list[int] = []
    proteins = [Protein(f"p{i}", "AAAAAAKGGGGGGR") for i in range(300)]
    _origins(proteins, _cfg(), progress=seen.append)
    assert sum(seen) == 300


# --------------------------------------------------------------------------- decoys


@pytest.mark.parametrize(
    ("seq", "enzyme", "want"),
    [
        ("PEPTIDEK", "trypsin", "EDITPEPK"),
        ("PEPTIDEK", "lys-c", "EDITPEPK"),
        ("AGCDR", "trypsin", "DCGAR"),
        ("DPEPTIDE", "asp-n", "DEDITPEP"),  # Asp-N keeps the first residue
        ("KPEPTIDE", "lys-n", "KEDITPEP"),
        ("K", "trypsin", "K"),
        ("AK", "trypsin", "AK"),
        ("DA", "asp-n", "DA"),
    ],
)
def test_decoy_sequence(seq: str, enzyme: str, want: str) -> None:
    got = decoy_sequence(seq, enzyme)  # type: ignore[arg-type]
    assert got == want
    assert sorted(got) == sorted(seq)  # same composition, hence same mass


# --------------------------------------------------------------------------- FASTA


def _write(tmp_path: Path, text: str, name: str = "db.fasta") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_read_fasta_ok(tmp_path: Path) -> None:
    p = _write(tmp_path, ">sp|P1|A_HUMAN first protein\nacdef\nGHIK*\n>P2\nMMMM\n")
    prots = read_fasta(p)
    assert prots == [Protein("sp|P1|A_HUMAN", "ACDEFGHIK"), Protein("P2", "MMMM")]


def test_read_fasta_real_bsa(data: Path) -> None:
    prots = read_fasta(data / "bsa-orbitrapxl" / "BSA.fasta")
    assert len(prots) == 1
    assert prots[0].accession == "sp|P02769|ALBU_BOVIN"
    assert prots[0].sequence.startswith("MKWVTFISLLLLFSSAYSRGVFRRDTHKSEIAHRFKDLGEEHFKGLVLIAFSQYLQQCPF")
    assert len(prots[0].sequence) == 607  # UniProt P02769: 607 aa


def test_truncated_fasta_names_file_and_header_line(tmp_path: Path) -> None:
    # line 1 >P1, 2-3 sequence, line 4 >P2, line 5 sequence, line 6 >P3 (no sequence)
    p = _write(tmp_path, ">P1 x\nAAAK\nGGGR\n>P2 y\nCCCK\n>P3 z\n", name="cut.fasta")
    with pytest.raises(InputError) as e:
        read_fasta(p)
    msg = str(e.value)
    assert "cut.fasta" in msg
    assert ":6:" in msg
    assert "P3" in msg


def test_header_without_sequence_in_the_middle(tmp_path: Path) -> None:
    p = _write(tmp_path, ">P1\nAAAK\n>P2\n>P3\nCCCK\n", name="mid.fasta")
    with pytest.raises(InputError) as e:
        read_fasta(p)
    assert "mid.fasta:3:" in str(e.value)


def test_invalid_residue_names_line_and_residue(tmp_path: Path) -> None:
    # header of the bad entry on line 3; '1' is its 4th residue
    p = _write(tmp_path, ">OK\nAAAK\n>BAD\nPEP1TIDE\n", name="bad.fasta")
    with pytest.raises(InputError) as e:
        read_fasta(p)
    msg = str(e.value)
    assert "bad.fasta:3:" in msg
    assert "'1'" in msg
    assert "BAD" in msg
    assert "position 4" in msg


def test_empty_fasta(tmp_path: Path) -> None:
    p = _write(tmp_path, "", name="empty.fasta")
    with pytest.raises(InputError, match="empty.fasta"):
        read_fasta(p)


def test_not_a_fasta(tmp_path: Path) -> None:
    p = _write(tmp_path, "PEPTIDEK\n", name="plain.txt")
    with pytest.raises(InputError, match="plain.txt"):
        read_fasta(p)


def test_crlf_and_blank_lines(tmp_path: Path) -> None:
    p = _write(tmp_path, ">P1 x\r\nAAAK\r\nGG GR\r\n\r\n>P2\r\nCCCK\r\n", name="win.fasta")
    assert read_fasta(p) == [Protein("P1", "AAAKGGGR"), Protein("P2", "CCCK")]


@pytest.mark.parametrize("head", ["\n", ";generated by a tool\n"])
def test_leading_blank_line_or_comment(tmp_path: Path, head: str) -> None:
    p = _write(tmp_path, head + ">P1\nAAAK\n", name="lead.fasta")
    assert read_fasta(p) == [Protein("P1", "AAAK")]


def test_missing_fasta(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing.fasta"):
        read_fasta(tmp_path / "missing.fasta")


def test_read_fastas_first_accession_wins(tmp_path: Path) -> None:
    a = _write(tmp_path, ">P1\nAAAK\n>P2\nCCCK\n", name="a.fasta")
    b = _write(tmp_path, ">P2\nDDDK\n>P3\nEEEK\n", name="b.fasta")
    prots = read_fastas([a, b])
    assert [(p.accession, p.sequence) for p in prots] == [("P1", "AAAK"), ("P2", "CCCK"), ("P3", "EEEK")]
