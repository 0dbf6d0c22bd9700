"""Objects over a socket pair with their arrays through shared memory (`rtsearch.serve.children.pipes.Channel`): what
goes in comes out, writable and unshared, however the two ends take turns and the region grows."""

from __future__ import annotations

import multiprocessing
import socket
from collections.abc import Iterator

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.io.spectra import read_spectra
from rtsearch.serve.children.pipes import REGION_FIRST, REGION_MIN, Channel
from tests.conftest import data_dir


def _echo(conn: object) -> None:
    """The other end, in a process of its own: sends back each object it receives (as an engine replies)."""
    channel = Channel(conn)  # type: ignore[arg-type]
    while True:
        try:
            obj = channel.recv()
        except (EOFError, OSError):
            return
        channel.send(obj)


@pytest.fixture
def echo() -> Iterator[Channel]:
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = socket.socketpair()
    proc = ctx.Process(target=_echo, args=(theirs,), daemon=True)
    proc.start()
    theirs.close()
    channel = Channel(ours)
    yield channel
    channel.close()
    proc.join(10)
    assert proc.exitcode == 0  # it ended at the closed pipe


@pytest.fixture
def pair() -> Iterator[tuple[Channel, Channel]]:
    a, b = socket.socketpair()
    ends = Channel(a), Channel(b)
    yield ends
    for end in ends:
        end.close()


def _same_batch(a: SpectraBatch, b: SpectraBatch) -> None:
    for name in ("scan", "precursor_mz", "rt", "mz", "intensity", "offsets"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name
        assert y.flags.writeable, name
    assert (b.run, b.charges, b.problem, b.native_id) == (a.run, a.charges, a.problem, a.native_id)


def test_real_batches_there_and_back_as_the_region_grows(echo: Channel) -> None:
    spectra = list(read_spectra(data_dir() / "ecoli-small" / "Ecoli_MS2_small.mzML"))
    # a lone spectrum (in band), ~120 spectra (~0.4 MB: the first region), ~4,000 (MB: a larger one), then small
    # again through the large region: each comes back equal
    for n in (1, 120, 4_170, 120, 1):
        batch = SpectraBatch.of((spectra * (n // len(spectra) + 1))[:n])
        echo.send(batch)
        got = echo.recv()
        assert isinstance(got, SpectraBatch) and len(got) == n
        _same_batch(batch, got)
    assert echo._out is not None and len(echo._out) > REGION_FIRST  # grown for the 4,170 spectra
    assert echo._in is not None and len(echo._in) == len(echo._out)  # the echo's region grew alike


def test_received_arrays_are_copies_the_next_message_cannot_change(pair: tuple[Channel, Channel]) -> None:
    a, b = pair
    first = np.arange(REGION_MIN, dtype=np.int64)  # 512 kB: through the region
    a.send({"x": first})
    got = b.recv()["x"]
    b.send("ack")  # taking turns: a may send again once b's reply came
    assert a.recv() == "ack"
    a.send({"x": -first})  # written over the same bytes of a's region
    again = b.recv()["x"]
    assert np.array_equal(got, first) and np.array_equal(again, -first)
    got[0] = 7  # writable, and its own
    assert again[0] == 0


def test_small_strided_and_plain_objects(pair: tuple[Channel, Channel]) -> None:
    a, b = pair
    grid = np.arange(24, dtype=np.float32).reshape(4, 6)
    obj = {"empty": np.zeros(0, np.int64), "strided": grid[:, ::2], "fortran": np.asfortranarray(grid),
           "text": ("scored", "x" * 100_000), "none": None}  # fmt: skip
    a.send(obj)
    assert a._out is None  # 192 bytes of arrays: in band, no region made
    got = b.recv()
    a.send({"fortran": -grid})  # another in-band message: the arrays received before stay as they were
    again = b.recv()["fortran"]
    assert np.array_equal(again, -grid)
    for arr in (got["fortran"], got["empty"], again):
        assert arr.flags.writeable and arr.flags.aligned
    assert got["empty"].shape == (0,) and got["empty"].dtype == np.int64
    assert np.array_equal(got["strided"], grid[:, ::2]) and np.array_equal(got["fortran"], grid)
    assert got["text"] == obj["text"] and got["none"] is None
    big = {"fortran": np.asfortranarray(np.ones((300, 300))), "strided": np.arange(40_000.0)[::2]}
    b.send(big)  # 720 kB + 160 kB, one of them not contiguous: through b's region
    back = a.recv()
    assert np.array_equal(back["fortran"], big["fortran"]) and np.array_equal(back["strided"], big["strided"])


def test_a_gone_end_is_an_error_not_a_hang(pair: tuple[Channel, Channel]) -> None:
    a, b = pair
    b.close()
    with pytest.raises(OSError):
        for _ in range(3):  # the first write may land in the socket's buffer
            a.send({"x": np.zeros(REGION_MIN)})
    a2, b2 = socket.socketpair()
    reader = Channel(b2)
    a2.close()
    with pytest.raises(EOFError):
        reader.recv()
    reader.close()


def test_a_region_announced_without_its_descriptor_is_an_error(pair: tuple[Channel, Channel]) -> None:
    import pickle
    import struct

    from rtsearch.serve.children.framing import pack
    from rtsearch.serve.children.pipes import NEW_REGION

    a, b = pair
    a.sock.sendall(pack(NEW_REGION, [struct.pack("<Q", 8), pickle.dumps(None)]))
    a.sock.send(b"\x01")  # the byte that should carry the descriptor, without it
    with pytest.raises(OSError, match="did not arrive"):
        b.recv()
