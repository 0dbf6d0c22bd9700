"""The bulk MS2 reader (`rtsearch.io.ms2`): the same spectra whatever the block size, through its fast path or line
by line, and errors that name the line in any block."""

from __future__ import annotations

import numpy as np
import pytest

import rtsearch.io.ms2 as ms2
from rtsearch.errors import InputError
from rtsearch.io.spectra import read_spectra
from tests.conftest import data_dir

DEMO = data_dir() / "yeast-small" / "demo.ms2"


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) > 0 and all(
        x.scan == y.scan and x.charges == y.charges and x.rt == y.rt and x.precursor_mz == y.precursor_mz
        and np.array_equal(x.mz, y.mz) and np.array_equal(x.intensity, y.intensity) and x.problem == y.problem
        for x, y in zip(a, b, strict=True)
    )  # fmt: skip


def test_any_block_size_and_either_path_read_the_same(monkeypatch, tmp_path) -> None:
    whole = list(read_spectra(DEMO))
    assert len(whole) == 150 and whole[0].scan == 10 and whole[0].charges == (2,)
    assert whole[0].mz[0] == 187.4 and whole[0].intensity[0] == np.float32(12.5)
    monkeypatch.setattr(ms2, "BLOCK_BYTES", 2048)  # most spectra cut across blocks
    assert _same(list(read_spectra(DEMO)), whole)
    blank = tmp_path / "blank.ms2"  # a blank line among the peaks: read line by line
    blank.write_text(DEMO.read_text().replace("\nS\t11\t", "\n\nS\t11\t", 1))
    assert _same(list(read_spectra(blank)), whole)
    nonl = tmp_path / "nonl.ms2"  # no newline at the end
    nonl.write_text(DEMO.read_text().rstrip("\n"))
    assert _same(list(read_spectra(nonl)), whole)


def test_errors_name_the_line_in_a_later_block(monkeypatch, tmp_path) -> None:
    lines = DEMO.read_text().splitlines()
    k = next(i for i in range(3000, 3200) if lines[i][:1].isdigit())
    lines[k] = "12.5 abc"
    path = tmp_path / "garbled.ms2"
    path.write_text("\n".join(lines) + "\n")
    before = "\n".join(lines[:k]).count("\nS\t")
    monkeypatch.setattr(ms2, "BLOCK_BYTES", 4096)
    got: list = []
    with pytest.raises(InputError, match=rf"garbled\.ms2: corrupt MS2 at line {k + 1} after scan \d+: .*'12.5 abc'"):
        got.extend(read_spectra(path))
    assert len(got) == before - 1
