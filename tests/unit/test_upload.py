"""`rtsearch.scoring.database.gpu.Upload`: arrays of several dtypes packed into one block and read back by name."""

from __future__ import annotations

import numpy as np

from rtsearch.scoring.database.gpu import Upload


def test_parts_round_trip_through_one_block():
    rng = np.random.default_rng(7)
    parts = {
        "mz": rng.uniform(100, 2000, (3, 5)),
        "n_peaks": rng.integers(0, 5, 3).astype(np.int32),  # odd count of 4-byte items: padded
        "t_lo": rng.integers(0, 1 << 40, 4),
        "empty": np.zeros(0, np.int64),
        "flags": np.array([True, False, True]),
    }
    up = Upload()
    for name, a in parts.items():
        up.add(name, a)
    copies: list[np.ndarray] = []

    def to_device(block: np.ndarray) -> np.ndarray:
        copies.append(block)
        return block.copy()

    sent = up.send(to_device)
    got = {name: sent.array(name) for name in parts}
    assert len(copies) == 1 and copies[0].dtype == np.float64
    # 15 + 2 (3 int32 padded to 4) + 4 + 0 + 1 (3 bools padded to 8 bytes) float64 words
    assert copies[0].shape == (22,)
    for name, a in parts.items():
        assert got[name].dtype == a.dtype and got[name].shape == a.shape, name
        np.testing.assert_array_equal(got[name], a, err_msg=name)
