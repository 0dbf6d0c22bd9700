"""The top-down proteoform database (`rtsearch.proteoforms`): prefix masses and N-terminal forms checked against
pyteomics' masses of the same sequences, decoys, the known PTMs, the store and the command line. Real proteins:
the FLASHApp E. coli top-down database (4,426 entries)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyteomics import mass

from rtsearch.cli import main
from rtsearch.config import ProteoformConfig, parse_config
from rtsearch.database.fasta import Protein, read_fasta
from rtsearch.errors import ConfigError, IndexMismatchError, InputError
from rtsearch.proteoforms.database import ACETYL, build_proteoforms
from rtsearch.proteoforms.store import load_proteoforms, save_proteoforms
from tests.conftest import data_dir

FASTA = data_dir() / "topdown-flashapp-ecoli" / "example_database.fasta"


@pytest.fixture(scope="module")
def ecoli():
    return build_proteoforms(read_fasta(FASTA), ProteoformConfig())


def test_counts_and_left_out(ecoli) -> None:
    c = ecoli.counts
    assert c["proteins"] + c["left_out_ambiguous"] + c["left_out_too_long"] == 4426 == FASTA.read_text().count(">")
    assert c["decoys"] == c["proteins"] and len(ecoli.accessions) == 2 * c["proteins"]
    assert ecoli.prefix.shape[0] == ecoli.residues.shape[0] + len(ecoli.accessions)


@pytest.mark.parametrize("k", [0, 1, 17, 2000, 4418])
def test_prefix_masses_and_forms_match_pyteomics(ecoli, k: int) -> None:
    seq = ecoli.sequence(k)
    prefix = ecoli.prefix_of(k)
    assert prefix[0] == 0 and len(prefix) == len(seq) + 1
    for cut in (1, 5, len(seq)):  # pyteomics: a sequence's mass = residues + H2O
        assert prefix[cut] == pytest.approx(mass.calculate_mass(sequence=seq[:cut]) - mass.calculate_mass(
            formula="H2O"), abs=1e-4)  # fmt: skip
    rows = np.flatnonzero(ecoli.form_protein == k)
    kinds = [ProteoformConfig().n_term_forms[i] for i in ecoli.form_kind[rows]]
    assert kinds == (["none", "nme", "nme_acetyl", "m_acetyl"] if seq[0] == "M" else ["none"])
    full = mass.calculate_mass(sequence=seq)
    want = {"none": full, "nme": mass.calculate_mass(sequence=seq[1:]),
            "nme_acetyl": mass.calculate_mass(sequence=seq[1:]) + ACETYL, "m_acetyl": full + ACETYL}
    for r, kind in zip(rows, kinds, strict=True):
        assert ecoli.form_mass[r] == pytest.approx(want[kind], abs=1e-4)
        assert ecoli.form_start[r] == (1 if kind.startswith("nme") else 0)


def test_decoys_keep_the_first_residue_and_composition(ecoli) -> None:
    n = ecoli.counts["proteins"]
    for k in (0, 3, 999):
        t, d = ecoli.sequence(k), ecoli.sequence(n + k)
        assert ecoli.accessions[n + k] == "DECOY_" + ecoli.accessions[k] and ecoli.is_decoy[n + k]
        assert d[0] == t[0] and sorted(d) == sorted(t) and d != t
    again = build_proteoforms(read_fasta(FASTA)[:5], ProteoformConfig())
    assert again.sequence(5) == ecoli.sequence(n)  # seeded a protein: the same decoy from a shorter database
    rev = build_proteoforms([Protein("p", "MAAGDEK")],
                            ProteoformConfig(decoys="reverse"))  # fmt: skip
    assert rev.sequence(1) == "MKEDGAA"


def test_ambiguous_and_long_proteins_are_left_out() -> None:
    db = build_proteoforms([Protein("a", "MPEPXIDE"), Protein("b", "MKLV" * 10), Protein("c", "GGK")],
                           ProteoformConfig(max_length=30, decoys="none"))  # fmt: skip
    assert db.accessions == ["c"] and db.counts["left_out_ambiguous"] == 1 and db.counts["left_out_too_long"] == 1


def test_known_ptms_and_config_errors() -> None:
    db = build_proteoforms([Protein("c", "GGK")], ProteoformConfig(known_ptms=("Phospho@STY", "+21.98@DE")))
    assert db.known.names == ["Phospho@STY", "+21.98@DE"] and db.known.mass.tolist() == [79.966331, 21.98]
    assert db.known.sites[0].sum() == 3 and db.known.sites[1].sum() == 2
    with pytest.raises(ConfigError, match="not on residues"):
        build_proteoforms([], ProteoformConfig(known_ptms=("Acetyl@Protein N-term",)))
    with pytest.raises(ConfigError, match="not a Unimod name"):
        build_proteoforms([], ProteoformConfig(known_ptms=("NoSuchPtm@Y",)))
    sulfo = build_proteoforms([], ProteoformConfig(known_ptms=("Sulfo@Y",)))  # any Unimod name: full tables
    assert sulfo.known.mass.tolist() == [79.956815]
    with pytest.raises(ConfigError, match="n_term_forms"):
        parse_config({"proteoforms": {"n_term_forms": ["none", "nme_methyl"]}})
    assert parse_config({"proteoforms": {"decoys": "reverse"}}).proteoforms.decoys == "reverse"


def test_store_round_trip_and_refusals(ecoli, tmp_path) -> None:
    out = tmp_path / "pf"
    save_proteoforms(ecoli, out, inputs=[])
    back = load_proteoforms(out)
    assert back.accessions == ecoli.accessions and back.params == ecoli.params and back.counts == ecoli.counts
    for name in ("residues", "offsets", "prefix", "form_protein", "form_mass", "form_kind"):
        assert np.array_equal(getattr(back, name), getattr(ecoli, name)), name
    assert back.known.names == ecoli.known.names
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(IndexMismatchError, match="rebuild"):
        load_proteoforms(out)
    with pytest.raises(InputError, match="not an rtsearch proteoform database"):
        load_proteoforms(tmp_path)


def test_command_line_build_and_info(tmp_path, capsys) -> None:
    out = tmp_path / "ecoli.pf"
    assert main(["proteoforms", "build", "--fasta", str(FASTA), "--out", str(out)]) == 0
    assert "4,419 proteins, 4,419 decoys" in capsys.readouterr().out
    assert main(["proteoforms", "info", str(out)]) == 0
    said = capsys.readouterr().out
    assert "Phospho@STY (+79.9663)" in said and "left out     7 with B/J/X/Z" in said
    assert main(["proteoforms", "build", "--fasta", str(tmp_path / "none.fasta"), "--out", str(out)]) == 2
    assert "FASTA file not found" in capsys.readouterr().err
