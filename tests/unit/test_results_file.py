"""A results TSV (`rtsearch.io.results.write_columns`): formatted in parts on threads, the same bytes as in one."""

from __future__ import annotations

import numpy as np

from rtsearch.io import results


def _columns(n: int) -> dict[str, object]:
    rng = np.random.default_rng(7)
    score = rng.normal(size=n) * 100
    score[::5] = np.nan  # spectra without a match: empty cells
    return {"run": ["a\trun"] * n, "scan": np.arange(n), "peptide": [f'PEP"{i}' for i in range(n)],
            "score": score, "decoy": rng.random(n) < 0.5}  # fmt: skip


def test_a_tsv_in_parts_is_the_tsv_in_one(tmp_path, monkeypatch) -> None:
    cols, names = _columns(1003), ("run", "scan", "peptide", "score", "decoy")
    monkeypatch.setattr(results.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(results, "TSV_PART_ROWS", 10**9)  # one part
    assert results.write_columns(cols, names, tmp_path / "one.tsv") == 1003
    monkeypatch.setattr(results, "TSV_PART_ROWS", 100)  # eight parts (126 rows each, the last 121)
    assert results.write_columns(cols, names, tmp_path / "parts.tsv") == 1003
    one, parts = (tmp_path / "one.tsv").read_bytes(), (tmp_path / "parts.tsv").read_bytes()
    assert parts == one
    lines = one.decode().splitlines()
    assert len(lines) == 1004 and lines[0] == "run\tscan\tpeptide\tscore\tdecoy"
    first = lines[1].split("\t")  # a tab in a run's name and a quote in a cell replaced; no match: empty
    assert first[0] == "a run" and first[1] == "0" and first[2] == "PEP'0" and first[3] == ""
    assert lines[-1].split("\t")[1] == "1002"


def test_an_empty_table_is_its_header(tmp_path) -> None:
    cols = {k: v[:0] for k, v in _columns(3).items()}  # type: ignore[index]
    assert results.write_columns(cols, ("run", "scan"), tmp_path / "e.tsv") == 0
    assert (tmp_path / "e.tsv").read_text() == "run\tscan\n"
