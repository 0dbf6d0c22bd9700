"""Where a process's threads stall: GC pauses and GIL starvation, with timestamps (diagnosis only).

`watch()` installs a GC callback that records every collection over ``min_ms`` and starts a
thread that asks for the GIL every millisecond and records each time it got it late; the
records print (and return) at `report()`. Used by ``stream_bench.py --stalls`` to tell a GC
pause from a thread holding the GIL when engine batches turn slow.
"""

from __future__ import annotations

import gc
import threading
import time

_gc: list[tuple[float, int, float]] = []
_late: list[tuple[float, float]] = []
_start = [0.0]
_stop = threading.Event()


def _on_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _start[0] = time.perf_counter()
    else:
        _gc.append((time.time(), info["generation"], (time.perf_counter() - _start[0]) * 1e3))


def _watchdog(min_ms: float) -> None:
    while not _stop.is_set():
        t0 = time.perf_counter()
        time.sleep(0.001)
        late = (time.perf_counter() - t0) * 1e3 - 1.0
        if late > min_ms:
            _late.append((time.time(), late))


def watch(min_ms: float = 2.0) -> None:
    gc.callbacks.append(_on_gc)
    threading.Thread(target=_watchdog, args=(min_ms,), name="stall-watchdog", daemon=True).start()
    _start.append(min_ms)


def _stamp(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d}"


def report() -> str:
    _stop.set()
    min_ms = _start[-1] if len(_start) > 1 else 2.0
    lines = [f"stalls: {len(_late)} GIL waits over {min_ms:g} ms; GC passes over {min_ms:g} ms:"]
    lines += [f"  {_stamp(t)} gen{g} {ms:.1f} ms" for t, g, ms in _gc if ms > min_ms]
    lines += [f"  {_stamp(t)} GIL late {ms:.1f} ms" for t, ms in _late[:200]]
    return "\n".join(lines)
