"""Tests for the on-disk index (`rtsearch.database.store`): save/load round trip,
memory-mapped arrays, the manifest (format version, parameters, input hashes)
and the refusals (other parameters, other format version, not an index,
overwriting a folder that is not an index).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from rtsearch.config import DatabaseConfig
from rtsearch.database.build import build_index
from rtsearch.database.index import PeptideIndex
from rtsearch.database.store import MANIFEST, file_record, load_index, read_manifest, save_index
from rtsearch.errors import IndexMismatchError, InputError


@pytest.fixture(scope="module")
def bsa_fasta(data: Path) -> Path:
    return data / "bsa-orbitrapxl" / "BSA.fasta"


@pytest.fixture(scope="module")
def bsa_index(bsa_fasta: Path) -> PeptideIndex:
    return build_index([bsa_fasta], DatabaseConfig(), input_hashes=[file_record(bsa_fasta)])


@pytest.fixture
def saved(tmp_path: Path, bsa_index: PeptideIndex) -> Path:
    out = tmp_path / "bsa.idx"
    save_index(bsa_index, out)
    return out


def _arrays(index: PeptideIndex) -> dict[str, np.ndarray]:
    return {
        "residues": index.bases.residues,
        "offsets": index.bases.offsets,
        "is_decoy": index.bases.is_decoy,
        "protein_n_term": index.bases.protein_n_term,
        "protein_c_term": index.bases.protein_c_term,
        "missed": index.base_missed_cleavages,
        "prot_offsets": index.base_protein_offsets,
        "proteins": index.base_proteins,
        "base": index.forms.base,
        "mod_pos": index.forms.mod_pos,
        "mod_id": index.forms.mod_id,
        "mass": index.forms.mass,
        "frag_mz": index.fragments.mz,
        "frag_pep": index.fragments.peptide,
        "bucket_min": index.fragments.bucket_min_mz,
    }


def test_round_trip(saved: Path, bsa_index: PeptideIndex) -> None:
    loaded = load_index(saved)
    a, b = _arrays(bsa_index), _arrays(loaded)
    for name in a:
        # memory-mapped (a plain view of the map, not a copy in RAM)
        assert type(b[name]) is np.ndarray and isinstance(b[name].base, np.memmap), name
        assert b[name].dtype == a[name].dtype, name
        np.testing.assert_array_equal(np.asarray(b[name]), a[name], err_msg=name)
    assert loaded.params == bsa_index.params
    assert loaded.mods == bsa_index.mods
    assert loaded.proteins == bsa_index.proteins == ["sp|P02769|ALBU_BOVIN"]
    assert loaded.fragments.bucket_size == bsa_index.fragments.bucket_size
    assert len(loaded) == len(bsa_index)
    for i in (0, len(loaded) // 2, len(loaded) - 1):
        assert loaded.proforma(i) == bsa_index.proforma(i)
        assert loaded.protein_accessions(i) == bsa_index.protein_accessions(i)


def test_manifest(saved: Path, bsa_fasta: Path, bsa_index: PeptideIndex) -> None:
    manifest = json.loads((saved / MANIFEST).read_text())
    assert manifest["format"] == "rtsearch-peptide-index"
    assert isinstance(manifest["format_version"], int)
    assert manifest["format_version"] == read_manifest(saved)["format_version"]
    params = manifest["params"]
    assert params["enzyme"] == "trypsin"
    assert params["missed_cleavages"] == 2
    assert params["fixed_mods"] == ["Carbamidomethyl@C"]
    assert params["variable_mods"] == ["Oxidation@M"]
    assert set(params) == {f.name for f in dataclasses.fields(DatabaseConfig)}
    [rec] = manifest["inputs"]
    raw = bsa_fasta.read_bytes()
    assert rec["name"] == "BSA.fasta"
    assert rec["bytes"] == len(raw)
    assert rec["sha256"] == hashlib.sha256(raw).hexdigest()
    counts = manifest["counts"]
    assert counts["proteins"] == 1
    assert counts["target_peptides"] + counts["decoy_peptides"] == len(bsa_index)
    assert counts["fragments"] == bsa_index.fragments.mz.shape[0]
    assert manifest["bucket_size"] == bsa_index.fragments.bucket_size


def test_load_with_matching_expectation(saved: Path) -> None:
    loaded = load_index(saved, expect=DatabaseConfig())
    assert loaded.params == DatabaseConfig()


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"missed_cleavages": 1}, "missed_cleavages"),
        ({"enzyme": "lys-c"}, "enzyme"),
        ({"variable_mods": ("Oxidation@M", "Deamidated@NQ")}, "variable_mods"),
        ({"decoy_prefix": "DECOY_"}, "decoy_prefix"),
        ({"min_mass": 400.0}, "min_mass"),
    ],
)
def test_load_with_other_parameters_refused(saved: Path, change: dict, key: str) -> None:
    other = dataclasses.replace(DatabaseConfig(), **change)
    with pytest.raises(IndexMismatchError) as e:
        load_index(saved, expect=other)
    msg = str(e.value)
    assert key in msg
    assert str(saved) in msg
    # only the differing key is named
    for unchanged in ("max_length", "fixed_mods", "bucket_size"):
        if unchanged != key:
            assert f"{unchanged}:" not in msg


def test_other_format_version_refused(saved: Path) -> None:
    path = saved / MANIFEST
    manifest = json.loads(path.read_text())
    manifest["format_version"] = 999
    path.write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match="999"):
        load_index(saved)
    with pytest.raises(IndexMismatchError):
        read_manifest(saved)


def test_folder_without_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "fragment_mz.npy").write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        load_index(folder)
    with pytest.raises(InputError):
        load_index(tmp_path / "does-not-exist")


def test_damaged_manifest_and_missing_array(saved: Path) -> None:
    (saved / "fragment_mz.npy").unlink()
    with pytest.raises(InputError, match="fragment_mz"):
        load_index(saved)
    (saved / MANIFEST).write_text("{not json")
    with pytest.raises(InputError, match="manifest"):
        load_index(saved)


def test_save_over_non_index_folder_refused(tmp_path: Path, bsa_index: PeptideIndex) -> None:
    dest = tmp_path / "results"
    dest.mkdir()
    keep = dest / "important.txt"
    keep.write_text("do not delete")
    with pytest.raises(InputError, match="not an rtsearch index"):
        save_index(bsa_index, dest)
    assert keep.read_text() == "do not delete"
    assert sorted(p.name for p in dest.iterdir()) == ["important.txt"]
    # no temporary folder left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_save_over_existing_index_replaces_it(saved: Path, bsa_fasta: Path) -> None:
    cfg = DatabaseConfig(missed_cleavages=0)
    smaller = build_index([bsa_fasta], cfg)
    save_index(smaller, saved)
    loaded = load_index(saved, expect=cfg)
    assert len(loaded) == len(smaller)
    np.testing.assert_array_equal(np.asarray(loaded.mass), smaller.mass)
    assert sorted(p.name for p in saved.parent.iterdir()) == [saved.name]


def test_index_without_variable_mods_round_trip(tmp_path: Path, bsa_fasta: Path) -> None:
    cfg = DatabaseConfig(variable_mods=())
    index = build_index([bsa_fasta], cfg)
    assert index.forms.mod_pos.shape == (len(index), 0)
    save_index(index, tmp_path / "plain.idx")
    loaded = load_index(tmp_path / "plain.idx", expect=cfg)
    np.testing.assert_array_equal(np.asarray(loaded.mass), index.mass)
    assert all("Oxidation" not in loaded.proforma(i) for i in range(len(loaded)))
