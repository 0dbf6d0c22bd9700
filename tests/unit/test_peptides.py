"""Tests for modifications (`rtsearch.database.mods`) and modified forms (`rtsearch.database.peptides`).

Form counts are combinatorial counts worked out by hand in the comments;
masses are checked against pyteomics (`pyteomics.mass.fast_mass`, an
independent implementation) plus the Unimod deltas written out here.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from pyteomics import mass as pymass

from rtsearch.database.mods import RESIDUE_MASS, UNIMOD, ModSet, parse_mod
from rtsearch.database.peptides import Bases, encode, enumerate_forms
from rtsearch.errors import ConfigError

# Unimod monoisotopic deltas, from unimod.org (not from rtsearch)
CAM = 57.021464
OX = 15.994915
ACETYL = 42.010565
PHOSPHO = 79.966331


# --------------------------------------------------------------------------- parse_mod


def test_parse_mod_residues() -> None:
    m = parse_mod("Carbamidomethyl@C")
    assert (m.name, m.kind, m.residues) == ("Carbamidomethyl", "residue", "C")
    assert m.delta == pytest.approx(CAM, abs=1e-6)
    m = parse_mod("Oxidation@M")
    assert (m.name, m.kind, m.residues) == ("Oxidation", "residue", "M")
    assert m.delta == pytest.approx(OX, abs=1e-6)
    m = parse_mod("Phospho@STY")
    assert (m.kind, m.residues) == ("residue", "STY")
    assert m.delta == pytest.approx(PHOSPHO, abs=1e-6)
    assert str(m) == "Phospho@STY"


def test_parse_mod_termini() -> None:
    m = parse_mod("Acetyl@Protein N-term")
    assert (m.name, m.kind, m.residues) == ("Acetyl", "protein n-term", "")
    assert m.delta == pytest.approx(ACETYL, abs=1e-6)
    m = parse_mod("Gln->pyro-Glu@N-term Q")
    assert (m.kind, m.residues) == ("n-term", "Q")
    assert m.delta == pytest.approx(-17.026549, abs=1e-6)
    m = parse_mod("Amidated@C-term")
    assert (m.kind, m.residues) == ("c-term", "")
    m = parse_mod("Amidated@Protein C-term")
    assert m.kind == "protein c-term"
    # 'C' alone is cysteine, not the C-terminus
    assert parse_mod("Carbamidomethyl@C").kind == "residue"


def test_parse_mod_by_mass() -> None:
    m = parse_mod("+15.9949@M")
    assert m.delta == pytest.approx(15.9949, abs=1e-12)
    assert (m.kind, m.residues) == ("residue", "M")
    assert m.label == "+15.9949"
    m = parse_mod("-17.0265@N-term Q")
    assert m.delta == pytest.approx(-17.0265)
    assert m.kind == "n-term"
    assert parse_mod("Oxidation@M").label == "Oxidation"


def test_parse_mod_unknown_name_suggests_unimod_names() -> None:
    with pytest.raises(ConfigError) as e:
        parse_mod("Oxidised@M")
    msg = str(e.value)
    assert "'Oxidised' is not a Unimod name" in msg and "did you mean" in msg and "'Oxidation'" in msg


@pytest.mark.parametrize("text", ["Oxidation", "Oxidation@", "Oxidation@1", "Oxidation@M-term", "+abc@M", "@M"])
def test_parse_mod_bad(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_mod(text)


def test_modset_rejects_two_fixed_on_one_residue() -> None:
    with pytest.raises(ConfigError, match="C"):
        ModSet.parse(("Carbamidomethyl@C", "Propionamide@C"), ())
    with pytest.raises(ConfigError):
        ModSet.parse(("Acetyl@N-term K",), ())


def test_residue_masses_with_fixed_mod() -> None:
    mods = ModSet.parse(("Carbamidomethyl@C",), ("Oxidation@M",))
    table = mods.residue_masses()
    _, offs = encode(["C"])
    codes, _ = encode(["CMG"])
    assert table[0] == 0.0
    assert table[codes[0]] == pytest.approx(pymass.std_aa_mass["C"] + CAM, abs=1e-5)
    assert table[codes[1]] == pytest.approx(pymass.std_aa_mass["M"], abs=1e-5)  # variable: not in table
    assert table[codes[2]] == pytest.approx(pymass.std_aa_mass["G"], abs=1e-5)
    assert offs.tolist() == [0, 1]


def test_residue_mass_table_matches_pyteomics() -> None:
    for aa, m in RESIDUE_MASS.items():
        if aa in pymass.std_aa_mass:
            assert m == pytest.approx(pymass.std_aa_mass[aa], abs=1e-5), aa


# --------------------------------------------------------------------------- enumerate_forms


def _bases(seqs: list[str], n_term: list[bool] | None = None, c_term: list[bool] | None = None) -> Bases:
    residues, offsets = encode(seqs)
    n = len(seqs)
    return Bases(
        residues=residues,
        offsets=offsets,
        is_decoy=np.zeros(n, dtype=bool),
        protein_n_term=np.array(n_term if n_term is not None else [False] * n, dtype=bool),
        protein_c_term=np.array(c_term if c_term is not None else [False] * n, dtype=bool),
    )


def _forms(seqs: list[str], fixed: tuple[str, ...], variable: tuple[str, ...], k: int, **kw: list[bool]):  # type: ignore[no-untyped-def]
    mods = ModSet.parse(fixed, variable)
    bases = _bases(seqs, **kw)
    return enumerate_forms(bases, mods, k, mods.residue_masses()), mods


def _described(forms, mods) -> Counter:  # type: ignore[no-untyped-def]
    """Each form as (base, frozenset of (position, mod name))."""
    out: Counter = Counter()
    for f in range(len(forms)):
        mods_here = frozenset(
            (int(p), mods.variable[int(m)].name)
            for p, m in zip(forms.mod_pos[f], forms.mod_id[f], strict=True)
            if p >= 0
        )
        out[(int(forms.base[f]), mods_here)] += 1
    return out


def test_three_met_two_mods() -> None:
    # 3 M sites, at most 2 oxidations: C(3,0) + C(3,1) + C(3,2) = 1 + 3 + 3 = 7 forms
    seq = "AMGMKMR"
    forms, mods = _forms([seq], (), ("Oxidation@M",), 2)
    assert len(forms) == 7
    described = _described(forms, mods)
    ms = [1, 3, 5]
    want = Counter(
        (0, frozenset((p, "Oxidation") for p in c)) for r in range(3) for c in itertools.combinations(ms, r)
    )
    assert described == want
    # masses: pyteomics mass of the sequence + one delta per oxidation
    base = pymass.fast_mass(seq)
    n_ox = (forms.mod_pos >= 0).sum(axis=1)
    np.testing.assert_allclose(forms.mass, base + n_ox * OX, atol=1e-5)


@pytest.mark.parametrize(("n_sites", "k", "want"), [(3, 1, 4), (3, 3, 8), (4, 2, 11), (5, 3, 26), (1, 2, 2), (0, 2, 1)])
def test_form_count_binomial(n_sites: int, k: int, want: int) -> None:
    # sum_{r=0..k} C(n, r): (3,1) 1+3; (3,3) 1+3+3+1; (4,2) 1+4+6; (5,3) 1+5+10+10; (1,2) 1+1; (0,2) 1
    seq = "G" + "M" * n_sites + "K"
    forms, _ = _forms([seq], (), ("Oxidation@M",), k)
    assert len(forms) == want


def test_masses_with_fixed_and_variable_mods() -> None:
    seqs = ["ACMCDEK", "PEPTIDEK", "MCMCM"]
    forms, mods = _forms(seqs, ("Carbamidomethyl@C",), ("Oxidation@M",), 2)
    # forms per base: 1 + 1 = 2; 1 (no M); 1 + 3 + 3 = 7
    assert Counter(forms.base.tolist()) == {0: 2, 1: 1, 2: 7}
    for f in range(len(forms)):
        seq = seqs[int(forms.base[f])]
        n_ox = int((forms.mod_pos[f] >= 0).sum())
        want = pymass.fast_mass(seq) + seq.count("C") * CAM + n_ox * OX
        assert forms.mass[f] == pytest.approx(want, abs=1e-5)
    # and against pyteomics' composition-based calculate_mass for the plain peptide
    plain = forms.mass[(forms.base == 1)][0]
    assert plain == pytest.approx(pymass.calculate_mass(sequence="PEPTIDEK"), abs=1e-5)


def test_protein_n_term_acetyl_only_on_flagged_bases() -> None:
    seqs = ["MAEKPLR", "GHIKWWR", "SAAAK"]
    forms, mods = _forms(seqs, (), ("Acetyl@Protein N-term",), 2, n_term=[True, False, True])
    assert Counter(forms.base.tolist()) == {0: 2, 1: 1, 2: 2}
    for f in range(len(forms)):
        seq = seqs[int(forms.base[f])]
        acetylated = int((forms.mod_pos[f] >= 0).sum())
        if acetylated:
            assert int(forms.mod_pos[f][forms.mod_pos[f] >= 0][0]) == 0
        assert forms.mass[f] == pytest.approx(pymass.fast_mass(seq) + acetylated * ACETYL, abs=1e-5)


def test_peptide_n_term_with_residue_restriction() -> None:
    # pyro-Glu only on peptides starting with Q
    forms, _ = _forms(["QAAK", "AQAK"], (), ("Gln->pyro-Glu@N-term Q",), 1)
    assert Counter(forms.base.tolist()) == {0: 2, 1: 1}


def test_two_residue_mods_never_on_one_residue() -> None:
    # Phospho@S and a made-up +10 Da on S: one site, never both on it
    forms, mods = _forms(["AASAA"], (), ("Phospho@S", "+10.0@S"), 2)
    assert len(forms) == 3  # none, phospho, +10
    # two S: 4 (position, mod) sites; subsets of size <= 2 with distinct positions:
    # 1 + 4 + (2 positions x 2 x 2 = 4) = 9, the 2 same-residue pairs excluded
    forms, mods = _forms(["ASAS"], (), ("Phospho@S", "+10.0@S"), 2)
    assert len(forms) == 9
    for f in range(len(forms)):
        pos = forms.mod_pos[f][forms.mod_pos[f] >= 0]
        assert len(set(pos.tolist())) == len(pos)
        pairs = zip(forms.mod_pos[f], forms.mod_id[f], strict=True)
        delta = sum(mods.variable[int(m)].delta for p, m in pairs if p >= 0)
        assert forms.mass[f] == pytest.approx(pymass.fast_mass("ASAS") + delta, abs=1e-5)
    assert len(_described(forms, mods)) == 9  # all distinct


def test_terminal_and_residue_mod_on_the_same_residue() -> None:
    # N-term acetyl and M oxidation may share the first residue: 1 + 2 + 1 = 4 forms
    forms, _ = _forms(["MK"], (), ("Acetyl@N-term", "Oxidation@M"), 2)
    assert len(forms) == 4
    np.testing.assert_allclose(
        np.sort(forms.mass),
        np.sort(pymass.fast_mass("MK") + np.array([0.0, ACETYL, OX, ACETYL + OX])),
        atol=1e-5,
    )
    # two N-terminal mods compete for one slot: 1 + 2 = 3 forms
    forms, _ = _forms(["AK"], (), ("Acetyl@N-term", "Carbamyl@N-term"), 2)
    assert len(forms) == 3


def test_fixed_terminal_mod_mass() -> None:
    # (a variable mod with no site here: zero variable mods would hit the bug below)
    forms, _ = _forms(["PEPTIDEK"], ("TMT6plex@N-term",), ("Oxidation@M",), 1)
    assert len(forms) == 1
    assert forms.mass[0] == pytest.approx(pymass.fast_mass("PEPTIDEK") + UNIMOD["TMT6plex"], abs=1e-5)


@pytest.mark.parametrize(("variable", "k"), [((), 2), (("Oxidation@M",), 0)])
def test_no_variable_mods(variable: tuple[str, ...], k: int) -> None:
    seqs = ["ACMK", "PEPTIDEK"]
    forms, _ = _forms(seqs, ("Carbamidomethyl@C",), variable, k)
    assert len(forms) == 2
    np.testing.assert_allclose(
        forms.mass, [pymass.fast_mass("ACMK") + CAM, pymass.fast_mass("PEPTIDEK")], atol=1e-5
    )


def test_fixed_protein_n_term_mod_is_refused() -> None:
    """A fixed protein-terminal mod would apply to every peptide's terminus: refused, variable works."""
    with pytest.raises(ConfigError, match="variable modification"):
        ModSet.parse(("Acetyl@Protein N-term",), ())
    forms, _ = _forms(
        ["MAEKPLR", "GHIKWWR"], (), ("Acetyl@Protein N-term",), 1, n_term=[True, False]
    )
    got = sorted((int(b), round(float(m), 4)) for b, m in zip(forms.base, forms.mass, strict=True))
    assert got == sorted([
        (0, round(pymass.fast_mass("MAEKPLR"), 4)), (0, round(pymass.fast_mass("MAEKPLR") + ACETYL, 4)),
        (1, round(pymass.fast_mass("GHIKWWR"), 4)),
    ])  # the internal peptide gets no acetyl form
