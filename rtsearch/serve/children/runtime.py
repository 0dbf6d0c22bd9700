"""The daemon's processes' own settings: one BLAS thread, garbage collection on its terms, the GIL's switch
interval, the fork server its children come from, the GPU each is given."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import multiprocessing
import os
import sys
import threading
from typing import Any

from rtsearch.config.environment import tuning

# An engine thread releases the GIL at every device synchronization and must win it back from a busy event
# loop each time; CPython hands it over only every switch interval (default 5 ms), so a batch with a
# few hundred synchronizations could wait far longer than it computes: 0.1 ms bounds that. With the
# engine in a process of its own (`rtsearch.serve.executors.engine_process`) the daemon's threads only hand over
# whole batches, and 1 ms switched less and scored more: at 50,000 spectra/s 188,425 spectra in 10 s
# against 159,712 at 0.1 ms, p99 at 20,000/s 47 against 60 ms (docs/history/RESULTS.md). The ``gil_switch_s``
# knob (`rtsearch.config.environment`) overrides both.
GIL_SWITCH_THREAD_S, GIL_SWITCH_PROCESS_S = 0.0001, 0.001


def gil_switch_s(*, engine_in_process: bool) -> float:
    """The daemon's GIL switch interval (seconds) for where its engine scores (see above)."""
    given = tuning().gil_switch_s
    if given is not None:
        return given
    return GIL_SWITCH_PROCESS_S if engine_in_process else GIL_SWITCH_THREAD_S


GC_IDLE, GC_OVERDUE = 700, 20_000  # pending allocations before a collection when idle / regardless


# What the daemon's fork server imports once (`child_context`); not Arrow (the refit process's: its allocator's
# threads must not be forked). The processes that may open CuPy (engine, elution) are spawned as before.
CHILD_PRELOAD = ("rtsearch.serve.children.forkserver_env", "numpy", "zmq", "orjson",
                 "rtsearch.serve.intake.intake_process", "rtsearch.serve.outputs.publisher_process")


def child_context() -> Any:
    """How the daemon starts its intake, publisher and refit processes: forked by a fork
    server — a clean process started once, which imported `CHILD_PRELOAD` — not spawned, each importing its ~250
    modules again (0.3-0.45 s a child on the development machine, docs/history/RESULTS.md 2026-11-29). A child gets the
    daemon's environment as it was when the first child started."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(CHILD_PRELOAD))
    return ctx


def single_threaded_blas() -> None:
    """One BLAS thread in this process (the daemon's and its refit process).

    The daemon's matrix work is small (a discriminant's matrix-vector product per batch,
    fits on a few thousand rows), and OpenBLAS's worker threads spin between calls: on the
    GPU machine they took 0.5 of a core in the daemon and 2-4 cores in the refit process at
    20,000 spectra/s, next to the threads that score and publish.
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def freeze_heap() -> None:
    """What exists now (target, kernels, caches) lives as long as the daemon: out of GC passes from here on.

    Automatic collection is turned off too: the workers collect when idle (`collect_garbage`).
    """
    gc.collect()
    gc.freeze()
    gc.disable()


def collect_garbage(*, idle: bool) -> None:
    """Python's cyclic GC on the daemon's terms: when the engine is idle, or when overdue.

    The daemon turns automatic collection off once warm: an automatic pass starts wherever an
    allocation crosses the threshold, often mid-batch, and a gen-1 pass over queued spectra
    takes milliseconds (a gen-2 one tens), a visible share of p99 at a few hundred spectra a
    second. Here the workers collect, with CPython's own generation rule, after publishing a
    batch when nothing waits, or regardless once ``GC_OVERDUE`` allocations are pending.
    """
    count0, count1, count2 = gc.get_count()
    if count0 < (GC_IDLE if idle else GC_OVERDUE):
        return
    gc.collect(2 if count2 >= 10 and count1 >= 10 else 1 if count1 >= 10 else 0)


def give_back_heap() -> None:
    """Collect cyclic garbage, then hand the C heap's free pages back to the system (glibc's ``malloc_trim``;
    nothing where the C library has none).

    For a process whose work comes in large, separate pieces (the refit process finishing a run of 225,000
    PSMs): glibc and Arrow's own pool (mimalloc or jemalloc: the results file is built with Arrow) keep what a
    piece freed, and the heap climbed run after run (`the since-deleted probe `refit_memory.py`` on the bench index:
    186 MB after the first run, 336-421 after the next seven; with this after each, 72 MB after every one; either alone
    was not enough). Call it once the piece's objects are gone, not inside the call that holds them.
    """
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        _libc().malloc_trim(0)
    arrow = sys.modules.get("pyarrow")  # Arrow's own pool (mimalloc or jemalloc), where it was used at all
    if arrow is not None:
        arrow.default_memory_pool().release_unused()


_PR_SET_NAME = 15


def name_os_thread(name: str | None = None) -> None:
    """Give the calling thread its Python name (or ``name``) at the OS level too (Linux, 15 bytes), so that
    ``top -H``, ``ps -L`` and ``/proc/PID/task/*/comm`` say which of the daemon's threads uses the CPU.
    Does nothing where ``prctl`` is missing."""
    with contextlib.suppress(OSError, AttributeError):
        _libc().prctl(_PR_SET_NAME, (name or threading.current_thread().name).encode()[:15], 0, 0, 0)


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, loaded once."""
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def host_gpus() -> int:
    """CUDA devices this process may use (``CUDA_VISIBLE_DEVICES`` counted where it is set; 0 without CuPy or a
    device): what local children — lanes, cluster workers — are spread over, child k on `gpu_of` (k mod that)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy, no driver, no device
        return 0


def gpu_of(k: int) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` a child on this process's GPU ``k`` (0 ≤ k < `host_gpus`) is given, set before it
    imports CuPy: ``k`` itself, or the k-th of the list this process was given (``CUDA_VISIBLE_DEVICES=2,3``: its
    GPUs 0 and 1 are 2 and 3). Asks no driver: a child that asked would see every GPU, whatever it sets after."""
    given = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return given[k % len(given)] if given else str(k)
