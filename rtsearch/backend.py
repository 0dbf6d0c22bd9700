"""Choose the array module once: CuPy on a CUDA GPU, NumPy otherwise.

``Backend.xp`` is the module every scoring function takes; ``to_device`` and
``to_host`` move arrays; nothing else in rtsearch imports cupy directly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import numpy as np

from rtsearch.errors import BackendError

log = logging.getLogger(__name__)

BackendName = Literal["auto", "cupy", "numpy"]


@dataclass
class Backend:
    """The array module in use and what it runs on."""

    name: Literal["cupy", "numpy"]
    xp: ModuleType
    device: str

    @property
    def is_gpu(self) -> bool:
        return self.name == "cupy"

    def to_device(self, a: Any) -> Any:
        return self.xp.asarray(a)

    def to_host(self, a: Any) -> np.ndarray:
        if self.is_gpu:
            return np.asarray(a.get())
        return np.asarray(a)

    def memory_used_bytes(self) -> int:
        """Bytes the GPU memory pool holds (0 on NumPy)."""
        if not self.is_gpu:
            return 0
        return int(self.xp.get_default_memory_pool().total_bytes())

    def synchronize(self) -> None:
        if self.is_gpu:
            self.xp.cuda.Stream.null.synchronize()


def _cupy() -> ModuleType | None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        return cupy
    except Exception as e:  # ImportError, CUDA driver errors: all mean "no GPU here"
        log.debug("CuPy unavailable: %s", e)
        return None


def get_backend(name: BackendName = "auto") -> Backend:
    """Return the backend for ``name`` (``auto`` prefers CuPy when a GPU is usable)."""
    if name not in ("auto", "cupy", "numpy"):
        raise BackendError(f"unknown backend {name!r}: choose auto, cupy or numpy")
    if name in ("auto", "cupy"):
        cp = _cupy()
        if cp is not None:
            props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
            dev = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            return Backend("cupy", cp, dev)
        if name == "cupy":
            raise BackendError("backend 'cupy' requested but CuPy or a CUDA GPU is not available")
    import platform

    return Backend("numpy", np, platform.processor() or platform.machine() or "cpu")
