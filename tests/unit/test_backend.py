"""`rtsearch.scoring.backend.start_driver` where a machine has no CUDA driver (CI, the development machine), no CuPy,
or is asked for NumPy: nothing fails, nothing is left running, and the backend chosen is the one it would have
been."""

from __future__ import annotations

import ctypes.util
import importlib.util
import logging
import threading
from types import SimpleNamespace

import pytest

from rtsearch.scoring import backend


def _driver_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "cuda-driver"]


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="this machine has a CUDA driver")
def test_no_driver_is_a_debug_line_and_numpy(monkeypatch, caplog) -> None:
    monkeypatch.setattr(backend, "_driver_started", False)
    real = importlib.util.find_spec  # CuPy taken as installed, whether or not it is here: the driver is tried
    installed = lambda name, *a: SimpleNamespace() if name == "cupy" else real(name, *a)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", installed)
    with caplog.at_level(logging.DEBUG, logger="rtsearch.scoring.backend"):
        backend.start_driver("auto")
        for t in _driver_threads():
            t.join(5)
        backend.start_driver("auto")  # once a process: no second thread
    assert not _driver_threads()
    said = [r.getMessage() for r in caplog.records if "not started ahead" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("CUDA driver not started ahead: libcuda.so.1"), said
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert backend.get_backend("auto").name == "numpy"


def test_numpy_starts_nothing(monkeypatch) -> None:
    monkeypatch.setattr(backend, "_driver_started", False)
    backend.start_driver("numpy")
    assert not _driver_threads() and backend._driver_started is False


def test_no_cupy_starts_nothing(monkeypatch) -> None:
    monkeypatch.setattr(backend, "_driver_started", False)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cupy" else real(name, *a))
    backend.start_driver("auto")
    assert not _driver_threads() and backend._driver_started is False
