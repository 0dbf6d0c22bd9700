"""`rtsearch.scoring.upload.file_of`: where in its file a memory-mapped array's bytes lie (the GPU upload reads them
from there); an array that is not a read-only file map has none."""

from __future__ import annotations

import os

import numpy as np

from rtsearch.scoring.upload import _read_into, file_of


def test_a_mapped_array_is_found_in_its_file(tmp_path) -> None:
    a = np.arange(1000, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r").view(np.ndarray)  # as the index store opens arrays
    for view in (mapped, mapped[250:], np.ascontiguousarray(mapped)):
        where = file_of(view)
        assert where is not None and where[0] == str(tmp_path / "a.npy")
        got = np.empty(view.shape, view.dtype)
        fd = os.open(where[0], os.O_RDONLY)
        try:
            _read_into(fd, got.view(np.uint8), where[1])
        finally:
            os.close(fd)
        assert got.tobytes() == view.tobytes()
    assert file_of(mapped[250:]) == (str(tmp_path / "a.npy"), file_of(mapped)[1] + 1000)


def test_other_arrays_have_no_file(tmp_path) -> None:
    a = np.arange(1000, dtype=np.int64)
    np.save(tmp_path / "a.npy", a)
    assert file_of(a) is None  # in memory
    assert file_of(np.load(tmp_path / "a.npy", mmap_mode="r+")) is None  # writable: the file may not hold its bytes
    assert file_of(np.load(tmp_path / "a.npy", mmap_mode="r")[::2]) is None  # strided
    assert file_of(np.load(tmp_path / "a.npy", mmap_mode="r").copy()) is None


def test_chunks_cover_every_array_once_largest_first() -> None:
    from rtsearch.scoring.upload import chunks_of

    sizes = [10, 0, 35, 16, 1]
    chunks = chunks_of(sizes, 16)
    assert [k for k, _, _ in chunks] == [2, 2, 2, 3, 0, 4]  # 35 bytes in three, the empty array in none
    for k, n in enumerate(sizes):
        spans = [(a, b) for j, a, b in chunks if j == k]
        covered = [x for a, b in spans for x in range(a, b)]
        assert covered == list(range(n)) and all(0 < b - a <= 16 for a, b in spans)
