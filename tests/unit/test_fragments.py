"""Tests for theoretical fragments and the fragment-ion index (`rtsearch.database.fragments`),
and for what `PeptideIndex` reports about a peptide (ProForma, proteins).

b/y ion m/z are checked against pyteomics (`fast_mass` with ion_type 'b'/'y',
charge 1) using an amino-acid mass table extended here with the modified
residues; the fragment index is compared with a brute-force list of every
b2../y2.. ion of every indexed peptide computed the same independent way.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest
from pyteomics import mass as pymass

from rtsearch.config import DatabaseConfig
from rtsearch.database.build import build_index
from rtsearch.database.fragments import by_ions, residue_masses
from rtsearch.database.index import PeptideIndex
from rtsearch.database.mods import ModSet
from rtsearch.database.peptides import Bases, encode, enumerate_forms

CAM = 57.021464  # Unimod Carbamidomethyl
OX = 15.994915  # Unimod Oxidation

# pyteomics residue masses plus modified residues: C carries the fixed
# carbamidomethyl, lower-case m is an oxidized methionine
AA = dict(pymass.std_aa_mass)
AA["C"] = pymass.std_aa_mass["C"] + CAM
AA["m"] = pymass.std_aa_mass["M"] + OX


def _b(modseq: str, i: int) -> float:
    return pymass.fast_mass(modseq[:i], ion_type="b", charge=1, aa_mass=AA)


def _y(modseq: str, i: int) -> float:
    return pymass.fast_mass(modseq[-i:], ion_type="y", charge=1, aa_mass=AA)


def _modseq(index: PeptideIndex, i: int) -> str:
    """The peptide with every oxidized M written as 'm' (the only variable mod used here)."""
    seq = list(index.sequence(i))
    for pos, mid in zip(index.forms.mod_pos[i], index.forms.mod_id[i], strict=True):
        if pos >= 0:
            assert index.mods.variable[int(mid)].name == "Oxidation"
            assert seq[int(pos)] == "M"
            seq[int(pos)] = "m"
    return "".join(seq)


# --------------------------------------------------------------------------- b/y ions


@pytest.mark.parametrize("modseq", ["PEPTIDEK", "ACMK", "AmCDEFGHIK", "mmR", "GC", "SAmPLECmK"])
def test_by_ions_match_pyteomics(modseq: str) -> None:
    seq = modseq.upper()
    mods = ModSet.parse(("Carbamidomethyl@C",), ("Oxidation@M",))
    residues, offsets = encode([seq])
    bases = Bases(residues, offsets, np.zeros(1, bool), np.zeros(1, bool), np.zeros(1, bool))
    table = mods.residue_masses()
    forms = enumerate_forms(bases, mods, 3, table)
    want_pos = {i for i, c in enumerate(modseq) if c == "m"}
    pick = [
        f for f in range(len(forms))
        if {int(p) for p in forms.mod_pos[f] if p >= 0} == want_pos
    ]  # fmt: skip
    assert len(pick) == 1
    one = forms.take(np.array(pick))
    masses, offs = residue_masses(bases, one, table, mods)
    assert offs.tolist() == [0, len(seq)]
    np.testing.assert_allclose(masses, [AA[c] for c in modseq], atol=1e-5)
    b, y, ion_off = by_ions(masses, offs)
    n = len(seq) - 1
    assert ion_off.tolist() == [0, n]
    np.testing.assert_allclose(b, [_b(modseq, i) for i in range(1, n + 1)], atol=1e-5)
    np.testing.assert_allclose(y, [_y(modseq, i) for i in range(1, n + 1)], atol=1e-5)
    # the precursor: b(L-1) + y1 = M + 2 H+
    full = pymass.fast_mass(modseq, aa_mass=AA)
    assert b[-1] + y[0] == pytest.approx(full + 2 * pymass.nist_mass["H+"][0][0], abs=1e-5)


def test_by_ions_several_forms_at_once() -> None:
    seqs = ["PEPTIDEK", "GGR", "ACDK"]
    mods = ModSet.parse(("Carbamidomethyl@C",), ("Oxidation@M",))
    residues, offsets = encode(seqs)
    bases = Bases(residues, offsets, np.zeros(3, bool), np.zeros(3, bool), np.zeros(3, bool))
    table = mods.residue_masses()
    forms = enumerate_forms(bases, mods, 2, table)
    masses, offs = residue_masses(bases, forms, table, mods)
    b, y, ion_off = by_ions(masses, offs)
    for f in range(len(forms)):
        seq = seqs[int(forms.base[f])]
        s, e = ion_off[f], ion_off[f + 1]
        assert e - s == len(seq) - 1
        np.testing.assert_allclose(b[s:e], [_b(seq, i) for i in range(1, len(seq))], atol=1e-5)
        np.testing.assert_allclose(y[s:e], [_y(seq, i) for i in range(1, len(seq))], atol=1e-5)


# --------------------------------------------------------------------------- the fragment index


@pytest.fixture(scope="module")
def bsa_small_buckets(data: Path) -> PeptideIndex:
    """BSA with the default database settings but the smallest buckets (many bucket boundaries)."""
    return build_index([data / "bsa-orbitrapxl" / "BSA.fasta"], DatabaseConfig(bucket_size=64))


def test_forms_sorted_by_mass_and_masses_match_pyteomics(bsa_small_buckets: PeptideIndex) -> None:
    index = bsa_small_buckets
    assert len(index) > 100
    assert np.all(np.diff(index.mass) >= 0)
    cfg = index.params
    assert index.mass.min() >= cfg.min_mass and index.mass.max() <= cfg.max_mass
    for i in range(len(index)):
        assert index.mass[i] == pytest.approx(pymass.fast_mass(_modseq(index, i), aa_mass=AA), abs=1e-5)
    n_decoy = int(np.sum(index.is_decoy(np.arange(len(index)))))
    assert n_decoy == len(index) // 2  # every target has its reversed decoy in this database


def test_bucket_invariants(bsa_small_buckets: PeptideIndex) -> None:
    frag = bsa_small_buckets.fragments
    bsize = frag.bucket_size
    assert bsize == 64
    n = frag.mz.shape[0]
    n_buckets = -(-n // bsize)
    assert n_buckets > 10
    assert frag.bucket_min_mz.shape == (n_buckets,)
    assert frag.mz.dtype == np.float32 and frag.peptide.dtype == np.uint32
    for k in range(n_buckets):
        mz = frag.mz[k * bsize : (k + 1) * bsize]
        pep = frag.peptide[k * bsize : (k + 1) * bsize]
        assert frag.bucket_min_mz[k] == mz.min()
        assert np.all(np.diff(pep.astype(np.int64)) >= 0)
        if k + 1 < n_buckets:
            nxt = frag.mz[(k + 1) * bsize : (k + 2) * bsize]
            assert mz.max() <= nxt.min()
    assert np.all(np.diff(frag.bucket_min_mz) >= 0)


def test_the_index_built_in_parts_on_threads_is_the_index_built_at_once(data: Path, monkeypatch) -> None:
    # the BSA index's fragments made in chunks of forms side by side on 3 threads, and (with repeated (m/z, peptide)
    # keys) sorted in 3 parts, then merged: the same bytes
    from rtsearch.database import build, fragments

    at_once = build_index([data / "bsa-orbitrapxl" / "BSA.fasta"], DatabaseConfig(bucket_size=64)).fragments
    monkeypatch.setattr(fragments, "_threads", lambda n, xp: 3)
    monkeypatch.setattr(fragments, "_cores", lambda xp: 3)  # and the forms' fragments in chunks of 100
    monkeypatch.setattr(build, "build_fragment_index", functools.partial(fragments.build_fragment_index, chunk=100))
    threaded = build_index([data / "bsa-orbitrapxl" / "BSA.fasta"], DatabaseConfig(bucket_size=64)).fragments
    keys = (at_once.mz.view(np.uint32).astype(np.uint64) << np.uint64(32)) | at_once.peptide
    assert len(np.unique(keys)) < len(keys)  # ties present
    for a, b in ((at_once.mz, threaded.mz), (at_once.peptide, threaded.peptide),
                 (at_once.bucket_min_mz, threaded.bucket_min_mz)):  # fmt: skip
        assert a.tobytes() == b.tobytes()


def test_keys_packed_and_split_in_place_are_the_shifted_keys() -> None:
    # the host's 64-bit keys written and read as two 32-bit words: the same numbers as shifts and masks
    from rtsearch.database.fragments import _halves, _pack

    rng = np.random.default_rng(11)
    hi = np.r_[rng.integers(0, 2**32, 1000, dtype=np.uint64), 0, 2**32 - 1].astype(np.uint32)
    lo = np.r_[rng.integers(0, 2**32, 1000, dtype=np.uint64), 2**32 - 1, 0].astype(np.uint32)
    key = _pack(hi, lo, np)
    assert np.array_equal(key, (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64))
    got_hi, got_lo = _halves(key, np)
    assert np.array_equal(got_hi, hi) and np.array_equal(got_lo, lo) and got_hi.flags.c_contiguous


def test_fragment_multiset_matches_brute_force(bsa_small_buckets: PeptideIndex) -> None:
    index = bsa_small_buckets
    lo, hi = index.params.fragment_min_mz, index.params.fragment_max_mz
    want_pep: list[int] = []
    want_mz: list[float] = []
    for i in range(len(index)):
        modseq = _modseq(index, i)
        for j in range(2, len(modseq)):  # b2..b(L-1), y2..y(L-1)
            for ion in (_b(modseq, j), _y(modseq, j)):
                if lo <= ion <= hi:
                    want_pep.append(i)
                    want_mz.append(ion)
    frag = index.fragments
    assert frag.mz.shape[0] == len(want_mz)
    order_want = np.lexsort((np.array(want_mz), np.array(want_pep)))
    order_got = np.lexsort((frag.mz, frag.peptide))
    np.testing.assert_array_equal(frag.peptide[order_got], np.array(want_pep)[order_want])
    np.testing.assert_allclose(frag.mz[order_got], np.array(want_mz)[order_want], atol=2e-3)
    assert index.manifest["counts"]["fragments"] == len(want_mz)


def test_bucket_size_does_not_change_the_fragments(data: Path, bsa_small_buckets: PeptideIndex) -> None:
    big = build_index([data / "bsa-orbitrapxl" / "BSA.fasta"], DatabaseConfig())
    a, b = big.fragments, bsa_small_buckets.fragments
    assert a.bucket_size == 8192
    ka = np.lexsort((a.mz, a.peptide))
    kb = np.lexsort((b.mz, b.peptide))
    np.testing.assert_array_equal(a.peptide[ka], b.peptide[kb])
    np.testing.assert_array_equal(a.mz[ka], b.mz[kb])


# --------------------------------------------------------------------------- ProForma and proteins


def _tiny_index(tmp_path: Path, variable: tuple[str, ...], fixed: tuple[str, ...] | None = None) -> PeptideIndex:
    fasta = tmp_path / "tiny.fasta"
    # trypsin: SACMPEK | GGR ; with one missed cleavage also SACMPEKGGR
    fasta.write_text(">P1 tiny\nSACMPEKGGR\n>P2 other\nWWWWKSACMPEK\n", encoding="utf-8")
    cfg = DatabaseConfig(min_length=4, min_mass=100.0, variable_mods=variable, max_variable_mods=2)
    if fixed is not None:
        cfg = dataclasses.replace(cfg, fixed_mods=fixed)
    return build_index([fasta], cfg)


def _find(index: PeptideIndex, seq: str, n_mods: int) -> int:
    hits = [
        i for i in range(len(index))
        if index.sequence(i) == seq and int((index.forms.mod_pos[i] >= 0).sum()) == n_mods
    ]  # fmt: skip
    assert len(hits) == 1, (seq, n_mods, hits)
    return hits[0]


def test_proforma_fixed_and_variable(tmp_path: Path) -> None:
    index = _tiny_index(tmp_path, ("Oxidation@M",))
    assert index.proforma(_find(index, "SACMPEK", 1)) == "SAC[Carbamidomethyl]M[Oxidation]PEK"
    assert index.proforma(_find(index, "SACMPEK", 0)) == "SAC[Carbamidomethyl]MPEK"
    assert index.proforma(_find(index, "SACMPEKGGR", 1)) == "SAC[Carbamidomethyl]M[Oxidation]PEKGGR"
    # the decoy (reversed, C-terminal K kept) of SACMPEK
    assert index.proforma(_find(index, "EPMCASK", 1)) == "EPM[Oxidation]C[Carbamidomethyl]ASK"


def test_proforma_mass_label_and_n_term(tmp_path: Path) -> None:
    index = _tiny_index(tmp_path, ("+15.9949@M", "Acetyl@Protein N-term"))
    i = _find(index, "SACMPEKGGR", 2)
    assert index.proforma(i) == "[Acetyl]-SAC[Carbamidomethyl]M[+15.9949]PEKGGR"
    want = pymass.fast_mass("SACMPEKGGR", aa_mass=AA) + 15.9949 + 42.010565
    assert index.mass[i] == pytest.approx(want, abs=1e-5)


def test_protein_accessions(tmp_path: Path) -> None:
    index = _tiny_index(tmp_path, ("Oxidation@M",))
    shared = _find(index, "SACMPEK", 0)
    assert index.protein_accessions(shared) == ["P1", "P2"]
    assert not index.is_decoy(shared)
    decoy = _find(index, "EPMCASK", 0)
    assert index.is_decoy(decoy)
    assert index.protein_accessions(decoy) == ["rev_P1", "rev_P2"]
    # decoy and target have the same mass
    assert index.mass[decoy] == pytest.approx(index.mass[shared], abs=1e-9)
    only = _find(index, "SACMPEKGGR", 0)
    assert index.protein_accessions(only) == ["P1"]
    assert int(index.missed_cleavages(only)) == 1
    assert int(index.length(only)) == 10


def test_real_bsa_peptide(bsa_small_buckets: PeptideIndex) -> None:
    index = bsa_small_buckets
    i = _find(index, "LVNELTEFAK", 0)  # a well-known BSA tryptic peptide
    assert index.protein_accessions(i) == ["sp|P02769|ALBU_BOVIN"]
    assert index.proforma(i) == "LVNELTEFAK"
    assert index.mass[i] == pytest.approx(pymass.calculate_mass(sequence="LVNELTEFAK"), abs=1e-5)
    d = _find(index, "AFETLENVLK", 0)
    assert index.protein_accessions(d) == ["rev_sp|P02769|ALBU_BOVIN"]


@pytest.mark.parametrize(
    ("mods", "fixed"),
    [(("Oxidation@M",), None), (("+15.9949@M", "Acetyl@Protein N-term"), None),
     (("Oxidation@M", "Amidated@C-term"), ("Carbamidomethyl@C", "TMT6plex@N-term"))],
)  # fmt: skip
def test_batched_names_equal_one_by_one(tmp_path: Path, mods: tuple[str, ...], fixed: tuple[str, ...] | None) -> None:
    from rtsearch.database.index import ONE_BY_ONE_BELOW

    index = _tiny_index(tmp_path, mods, fixed)
    ids = np.arange(len(index))[::-1]  # any order, modified and unmodified, targets and decoys
    ids = np.tile(ids, ONE_BY_ONE_BELOW // len(ids) + 1)  # enough for the batched way (fewer are named one by one)
    assert index.proformas(ids) == [index.proforma(int(i)) for i in ids]
    assert index.accessions(ids) == [index.protein_accessions(int(i)) for i in ids]
    assert index.proformas(ids[:0]) == [] and index.accessions(ids[:0]) == []


def test_batched_names_on_real_bsa(bsa_small_buckets: PeptideIndex) -> None:
    index = bsa_small_buckets
    ids = np.random.default_rng(7).integers(0, len(index), 500)
    assert index.proformas(ids) == [index.proforma(int(i)) for i in ids]
    assert index.accessions(ids) == [index.protein_accessions(int(i)) for i in ids]


def test_fragment_masses_are_summed_in_order_and_within_one_float32_step_of_a_running_sum(demo_index) -> None:
    """Each form's residues are added left to right (what NumPy and CuPy both reproduce); a cumulative sum over
    the whole chunk (the earlier method) lost up to 1e-7 Da to cancellation: at most one float32 step apart."""
    from rtsearch.database.fragments import _index_fragments
    from rtsearch.types import PROTON

    idx, cfg = demo_index, demo_index.params
    part = idx.forms.take(np.arange(0, 200_000))
    table = idx.mods.residue_masses()
    mz, pep = _index_fragments(idx.bases, part, table, idx.mods, cfg.fragment_min_mz, cfg.fragment_max_mz, 0)
    masses, offsets = residue_masses(idx.bases, part, table, idx.mods)
    running = np.cumsum(masses)  # the earlier way: differences of one long running sum
    start = np.concatenate(([0.0], running))[offsets[:-1]]
    k = 12_345  # one form by hand: its b2 is m0 + m1, added in that order
    b2 = masses[offsets[k]] + masses[offsets[k] + 1] + PROTON
    assert np.float32(b2) in mz[pep == k]
    b, _, ion_off = by_ions(masses, offsets)
    n_ions = np.diff(ion_off)
    form_of = np.repeat(np.arange(len(part)), n_ions)
    within = np.arange(ion_off[-1]) - ion_off[:-1][form_of]
    old_b = running[offsets[:-1][form_of] + within] - start[form_of] + PROTON
    steps = np.abs(b.astype(np.float32).view(np.int32).astype(np.int64) - old_b.astype(np.float32).view(np.int32))
    assert steps.max() <= 1 and 0 < np.count_nonzero(steps) < len(steps) // 100
