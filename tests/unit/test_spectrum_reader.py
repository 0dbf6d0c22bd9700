"""The offline search's reader (`rtsearch.search.offline.SpectrumReader`): batches read ahead in a thread, a file's
error raised in order after the batches before it, and a reader left early stops."""

from __future__ import annotations

import time

import pytest

from rtsearch.errors import InputError
from rtsearch.io.spectra import read_spectra
from rtsearch.search.offline import SpectrumReader
from tests.conftest import data_dir

F13 = data_dir() / "iprg2013-f13" / "F13.mgf"


def test_batches_in_file_order_then_the_error_where_it_was(tmp_path) -> None:
    cut = tmp_path / "cut.mgf"
    cut.write_text("\n".join(F13.read_text().splitlines()[:3005]) + "\n")  # ends inside an entry
    whole = [s.scan for s in read_spectra(F13)]
    scans: list[int] = []
    with SpectrumReader([F13, cut], batch_size=100) as reader, pytest.raises(InputError, match="cut.mgf"):
        for batch in reader:
            assert len(batch) <= 100
            scans.extend(batch.scan.tolist())
    before: list[int] = []
    with pytest.raises(InputError):
        before.extend(s.scan for s in read_spectra(cut))
    assert len(before) > 0
    assert scans == whole + before  # every spectrum before the error (the search stops at it: nothing is written)
    assert reader.total == 1406 + cut.read_text().count("BEGIN IONS")


def test_a_reader_left_early_stops_its_thread() -> None:
    t0 = time.perf_counter()
    with SpectrumReader([F13] * 50, batch_size=10, depth=2) as reader:
        first = next(iter(reader))
    assert len(first) == 10 and not reader._thread.is_alive() and time.perf_counter() - t0 < 5
