"""Objects over a pipe with their arrays out of band (`rtsearch.serve.pipes`): what goes in comes out."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.io.spectra import read_spectra
from rtsearch.serve.pipes import recv_object, send_object
from tests.conftest import data_dir


def _through_pipe(obj: object) -> object:
    ours, theirs = multiprocessing.Pipe()
    # a thread sends: a large buffer fills the pipe before the reader takes it
    sender = threading.Thread(target=send_object, args=(ours, obj))
    sender.start()
    out = recv_object(theirs)
    sender.join()
    ours.close()
    theirs.close()
    return out


def test_real_spectra_arrive_equal_and_writable() -> None:
    spectra = list(read_spectra(data_dir() / "ecoli-small" / "Ecoli_MS2_small.mzML"))
    batch = SpectraBatch.of(spectra * 30)  # ~4,000 spectra, MB of peaks: many pipe-fulls
    got = _through_pipe(batch)
    assert isinstance(got, SpectraBatch)
    for name in ("scan", "precursor_mz", "rt", "mz", "intensity", "offsets"):
        a, b = getattr(batch, name), getattr(got, name)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), name
        assert b.flags.writeable, name
    assert (got.run, got.charges, got.problem, got.native_id) == (batch.run, batch.charges, batch.problem,
                                                                  batch.native_id)  # fmt: skip
    assert got.mz.nbytes > 1 << 20


def test_empty_strided_and_plain_objects() -> None:
    grid = np.arange(24, dtype=np.float32).reshape(4, 6)
    obj = {"empty": np.zeros(0, np.int64), "strided": grid[:, ::2], "fortran": np.asfortranarray(grid),
           "text": ("scored", "x" * 100_000), "none": None}  # fmt: skip
    got = _through_pipe(obj)
    assert isinstance(got, dict)
    assert got["empty"].shape == (0,) and got["empty"].dtype == np.int64
    assert np.array_equal(got["strided"], grid[:, ::2]) and np.array_equal(got["fortran"], grid)
    assert got["text"] == obj["text"] and got["none"] is None


def test_a_small_object_is_one_message_a_large_one_several() -> None:
    ours, theirs = multiprocessing.Pipe()
    small = {"scan": np.arange(10), "mz": np.linspace(100.0, 2000.0, 200)}
    send_object(ours, small)
    theirs.recv_bytes()
    assert not theirs.poll(0.1)  # all of it came in that one message
    large = {"mz": np.zeros(1 << 16), "scan": np.arange(3)}  # 512 kB of m/z: out of band
    sender = threading.Thread(target=send_object, args=(ours, large))
    sender.start()
    theirs.recv_bytes()
    assert theirs.poll(1.0)  # the buffers follow as messages of their own
    while theirs.poll(0.1):
        theirs.recv_bytes()
    sender.join()
    ours.close()
    theirs.close()
