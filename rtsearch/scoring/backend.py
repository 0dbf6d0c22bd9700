"""Choose the array module once: CuPy on a CUDA GPU, NumPy otherwise.

``Backend.xp`` is the module every scoring function takes; ``to_device`` and
``to_host`` move arrays; nothing else in rtsearch imports cupy directly.

Streams and pinned memory, for the daemon's worker threads: `Backend.bind_worker`
gives the calling thread its own non-blocking CUDA stream (CuPy's current
stream is per thread), and `Backend.to_device` stages large host arrays
through a per-thread pinned buffer so the copy is asynchronous on that
stream: two workers' batches then overlap copies with scoring. The staging
buffer is reused batch after batch (`Backend.begin_batch`); that is safe
because a batch always reads results back (a synchronizing copy) before its
thread starts the next one.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from rtsearch.config import BackendChoice, BackendName, choices
from rtsearch.errors import BackendError
from rtsearch.scoring.kernel_cache import seed_for

log = logging.getLogger(__name__)

PINNED_MIN_BYTES = 64 * 1024  # smaller copies go directly: staging would cost more than it saves
_ALIGN = 256


class _Staging(threading.local):
    buf: Any = None
    offset: int = 0


@dataclass
class Backend:
    """The array module in use and what it runs on."""

    name: BackendName
    xp: ModuleType
    device: str

    @property
    def is_gpu(self) -> bool:
        return self.name == "cupy"

    def bind_worker(self) -> None:
        """Give the calling thread its own non-blocking CUDA stream (no-op on NumPy)."""
        if self.is_gpu:
            self.xp.cuda.Stream(non_blocking=True).use()

    def begin_batch(self) -> None:
        """Start reusing this thread's pinned staging buffer from its beginning."""
        _staging.offset = 0

    def to_device(self, a: Any) -> Any:
        """``a`` on the device; large host arrays go through pinned memory, asynchronously."""
        if not self.is_gpu or not isinstance(a, np.ndarray) or a.nbytes < PINNED_MIN_BYTES:
            return self.xp.asarray(a)
        a = np.ascontiguousarray(a)
        buf = self._stage(a.nbytes)
        host = buf.view(a.dtype).reshape(a.shape)
        host[...] = a
        out = self.xp.empty(a.shape, dtype=a.dtype)
        out.set(host, stream=self.xp.cuda.get_current_stream())
        return out

    def _stage(self, nbytes: int) -> np.ndarray:
        st = _staging
        need = st.offset + nbytes
        if st.buf is None or need > st.buf.nbytes:
            # copies still reading the old buffer must finish before it is released
            self.xp.cuda.get_current_stream().synchronize()
            size = max(2 * need, 8 << 20)
            # the pinned block as a NumPy array that keeps it alive; not ``cupyx.empty_pinned``: importing cupyx
            # imports cupyx.scipy and, where SciPy is installed, scipy.sparse, Cython and numpy.f2py: 241 modules,
            # ~0.1 s of a process's first batch on the GPU machine (the since-deleted probe first_batch_probe.py,
            # RESULTS 2026-11-28)
            st.buf = np.frombuffer(self.xp.cuda.alloc_pinned_memory(size), dtype=np.uint8, count=size)
        view = st.buf[st.offset : st.offset + nbytes]
        st.offset += -(-nbytes // _ALIGN) * _ALIGN
        return view

    def to_host(self, a: Any) -> np.ndarray:
        """``a`` as a NumPy array (a copy back from the device when it lives there)."""
        if self.is_gpu and not isinstance(a, np.ndarray):
            return np.asarray(a.get())
        return np.asarray(a)

    def memory_used_bytes(self) -> int:
        """Bytes the GPU memory pool holds (0 on NumPy)."""
        if not self.is_gpu:
            return 0
        return int(self.xp.get_default_memory_pool().total_bytes())

    def synchronize(self) -> None:
        """Wait for the calling thread's current stream."""
        if self.is_gpu:
            self.xp.cuda.get_current_stream().synchronize()


_staging = _Staging()
_compiled: dict[tuple[int, str, str, tuple[str, ...]], Any] = {}


def array_module(a: Any) -> Any:
    """NumPy, or CuPy for a CuPy array (without importing CuPy on a machine that has none)."""
    return np if isinstance(a, np.ndarray) else sys.modules["cupy"]


def compiled_kernel(cp: Any, source: str, name: str, options: tuple[str, ...] = ()) -> Any:
    """Kernel ``name`` of CUDA ``source``, compiled once a device and process (NVRTC's disk cache aside)."""
    key = (cp.cuda.Device().id, name, source, options)
    if key not in _compiled:
        _compiled[key] = cp.RawModule(code=source, options=options).get_function(name)
    return _compiled[key]


def start_driver(choice: BackendChoice = "auto") -> None:
    """Initialize the CUDA driver and make device 0's primary context (the one CuPy's runtime then uses) in a thread
    of their own, through the driver API, so that the calling thread can import CuPy meanwhile: ctypes leaves the
    GIL for each call, where CuPy's own first call holds it through the driver's start (~0.1 s) and comes only after
    its import (~0.27 s on the H200 machine, docs/history/RESULTS.md). Once a process; nothing for ``numpy`` or where
    CuPy
    is not installed (a context would hold GPU memory for nothing), and nothing but a debug line where there is no
    driver. Call it after forking any worker processes: the driver must not be started in a process that forks
    children that use it."""
    global _driver_started
    if choice == "numpy" or _driver_started or importlib.util.find_spec("cupy") is None:
        return
    _driver_started = True

    def start() -> None:
        try:
            cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as e:  # no driver library: CuPy finds no GPU either
            log.debug("CUDA driver not started ahead: %s", e)
            return
        device, context = ctypes.c_int(), ctypes.c_void_p()
        for name, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(device), 0)),
                           ("cuDevicePrimaryCtxRetain", (ctypes.byref(context), device))):  # fmt: skip
            code = getattr(cuda, name)(*args)
            if code != 0:  # no device, a driver too old...: CuPy's own start says what, or finds no GPU
                log.debug("CUDA driver not started ahead: %s returned %d", name, code)
                return
        log.debug("CUDA driver started, device 0's primary context made")

    threading.Thread(target=start, name="cuda-driver", daemon=True).start()


_driver_started = False


def _cupy() -> ModuleType | None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        _start_context(cupy)
        return cupy
    except Exception as e:  # ImportError, CUDA driver errors: all mean "no GPU here"
        log.debug("CuPy unavailable: %s", e)
        return None


def _start_context(cp: ModuleType) -> None:
    """The current device's CUDA context made in a thread of its own (~0.1 s in the driver, the GIL released),
    while this one goes on to seed the kernel cache and open the target, rather than by the target's first
    allocation; once a process. Its failure is left to the first allocation to report."""
    device = cp.cuda.runtime.getDevice()
    if device in _contexts:
        return
    _contexts.add(device)

    def make() -> None:
        try:
            with cp.cuda.Device(device):
                cp.cuda.runtime.free(cp.cuda.runtime.malloc(1))
        except Exception as e:
            log.debug("CUDA context not made ahead: %s", e)

    threading.Thread(target=make, name="cuda-context", daemon=True).start()


_contexts: set[int] = set()


def get_backend(name: BackendChoice = "auto") -> Backend:
    """Return the backend for ``name`` (``auto`` prefers CuPy when a GPU is usable)."""
    if name not in choices(BackendChoice):
        raise BackendError(f"unknown backend {name!r}: choose {', '.join(choices(BackendChoice))}")
    if name in ("auto", "cupy"):
        cp = _cupy()
        if cp is not None:
            seed_for(cp)  # precompiled kernels into CuPy's cache, before anything compiles
            props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
            dev = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            return Backend("cupy", cp, dev)
        if name == "cupy":
            raise BackendError("backend 'cupy' requested but CuPy or a CUDA GPU is not available")
    import platform

    return Backend("numpy", np, platform.processor() or platform.machine() or "cpu")
