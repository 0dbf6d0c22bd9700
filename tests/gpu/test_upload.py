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
