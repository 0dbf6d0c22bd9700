"""`rtsearch.scoring.upload`: a memory-mapped array reaches the GPU byte for byte, by chunks over threads, and
no slower than ``cupy.asarray``."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.upload import upload

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("source", ["file", "memory"])
@pytest.mark.parametrize(("dtype", "n"), [(np.float32, 50_000_003), (np.uint8, 33 << 20), (np.int64, 5)])
def test_upload_gives_the_same_bytes(tmp_path, dtype, n: int, source) -> None:
    cp = get_backend("cupy").xp
    rng = np.random.default_rng(7)
    a = rng.integers(0, 255, n, dtype=np.uint8).astype(dtype) if dtype != np.float32 else rng.random(n, dtype)
    np.save(tmp_path / "a.npy", a)
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r").view(np.ndarray)
    got = upload(cp, mapped, chunk_bytes=4 << 20, source=source)  # the last chunk a partial one for the odd sizes
    assert got.dtype == a.dtype and got.shape == a.shape
    assert cp.asnumpy(got).tobytes() == a.tobytes()
    part = upload(cp, mapped[1000:], chunk_bytes=4 << 20, source=source)  # a view: its bytes from its offset
    assert cp.asnumpy(part).tobytes() == a[1000:].tobytes()


def test_upload_is_not_slower_than_asarray(tmp_path) -> None:
    cp = get_backend("cupy").xp
    a = np.random.default_rng(1).random(150_000_000, dtype=np.float32)  # 600 MB, the size of an index's column
    np.save(tmp_path / "a.npy", a)
    del a
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r").view(np.ndarray)
    cp.asarray(mapped[:1000])
    seconds = {}
    for name, fn in (("asarray", cp.asarray), ("upload", lambda x: upload(cp, x)), ("asarray ", cp.asarray),
                     ("upload ", lambda x: upload(cp, x))):  # fmt: skip
        t0 = time.perf_counter()
        out = fn(mapped)
        cp.cuda.Device().synchronize()
        seconds[name] = time.perf_counter() - t0
        del out
    print("\n600 MB memory-mapped to the GPU, seconds:", {k.strip() + str(i): round(v, 3)
                                                          for i, (k, v) in enumerate(seconds.items())})  # fmt: skip
    assert min(seconds["upload"], seconds["upload "]) <= min(seconds["asarray"], seconds["asarray "])


def test_arrays_uploaded_together_keep_their_bytes(tmp_path) -> None:
    """A target's arrays in one pass: large and small, empty, one from memory among the maps, and a view at an
    offset of its file; every one byte for byte, with chunks smaller than the largest arrays."""
    from rtsearch.scoring.upload import upload_all

    cp = get_backend("cupy").xp
    rng = np.random.default_rng(11)
    arrays = [rng.random(3_000_001, np.float32), rng.integers(0, 1 << 30, 1_000_003, dtype=np.int64),
              np.zeros(0, np.float64), rng.integers(0, 255, 17, dtype=np.uint8),
              rng.integers(-300, 300, (40_001, 2), dtype=np.int16)]  # fmt: skip
    hosts = []
    for k, a in enumerate(arrays):
        np.save(tmp_path / f"{k}.npy", a)
        hosts.append(np.load(tmp_path / f"{k}.npy", mmap_mode="r").view(np.ndarray))
    hosts[1] = hosts[1][5:]  # a view: its bytes from its offset in the file
    hosts.append(np.arange(7, dtype=np.float64))  # in memory
    got = upload_all(cp, hosts, threads=3, chunk_bytes=1 << 20)
    assert len(got) == len(hosts)
    for g, h in zip(got, hosts, strict=True):
        assert g.dtype == h.dtype and g.shape == h.shape
        assert cp.asnumpy(g).tobytes() == np.ascontiguousarray(h).tobytes()
