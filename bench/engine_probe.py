"""Engine time per batch size on the stream benchmark's spectra and settings, one thread and two.

Separates the engine's own cost from the daemon's (GIL, scheduling): compare with the
``rtsearch_engine_batch_seconds`` that stream_bench.py reports.

    python bench/engine_probe.py --data ../shared/data --index-cache .benchcache/idx20k
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulators"))

from bench.stream_bench import RUNS, get_index  # noqa: E402
from rtsearch.batch import SpectraBatch  # noqa: E402
from rtsearch.config import SearchConfig, Tolerance  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.scoring.database.engine import Engine  # noqa: E402
from rtsearch_sim.replay import load_run  # noqa: E402


def _burn() -> None:
    """A process that keeps one core busy with Python's own work (dicts, lists, small arrays), as the daemon's
    intake and publisher processes do."""
    d: dict[int, list[int]] = {}
    a = np.arange(64.0)
    while True:
        for i in range(1000):
            d[i % 4096] = [i, i + 1]
            a = a * 1.000001
        d.clear()


def paced(engine: Engine, pool: list[Any], hz: float, seconds: float) -> int:
    """Batches of one at a fixed rate, as the daemon sees them at low load: p50/p99/max and when the slow ones came.

    Tells a machine's periodic stalls (the same pattern with no daemon around) from the daemon's own.
    """
    out: list[tuple[float, float]] = []

    def work() -> None:
        engine.backend.bind_worker()
        start = time.perf_counter()
        for r in range(int(hz * seconds)):
            time.sleep(max(0.0, start + r / hz - time.perf_counter()))
            t0 = time.perf_counter()
            engine.score(SpectraBatch.of(pool[r % len(pool) : r % len(pool) + 1]))
            out.append((time.time(), (time.perf_counter() - t0) * 1e3))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    a = np.array([ms for _, ms in out])
    print(f"paced {hz:g}/s x {len(a)}: median {np.median(a):.2f} ms p99 {np.percentile(a, 99):.2f} max {a.max():.2f}; "
          f"{int((a > 4).sum())} over 4 ms at:", flush=True)
    for when, ms in out:
        if ms > 4:
            print(f"  {time.strftime('%H:%M:%S', time.localtime(when))}.{int(when % 1 * 1000):03d} {ms:.1f} ms")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--index-cache", type=Path)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--threads", default="1", help="comma list of engine thread counts to time (e.g. 1,2)")
    ap.add_argument("--blocks", action="store_true", help="time count_select block sizes (GPU)")
    ap.add_argument("--preprocess", action="store_true",
                    help="time host vs device preprocessing, CuPy calls vs the fused kernel (GPU)")
    ap.add_argument("--no-fused", action="store_true",
                    help="device batches preprocessed by CuPy calls, not the fused kernel (to compare)")
    ap.add_argument("--paced", type=float, metavar="HZ",
                    help="only: one spectrum at a time at HZ for --seconds, in a worker thread; list slow batches")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--device-choice-min", type=int, metavar="Q",
                    help="batches of at least Q queries have their best chosen on the device (default: the engine's)")
    ap.add_argument("--sizes", default="1,4,32,128,256,1024,4096", help="batch sizes to time")
    ap.add_argument("--precursor-tolerance", default="", metavar="TOL",
                    help="the search's precursor window, e.g. '20 Da' (default [search]'s: 20 ppm): how the work "
                    "grows with the window (a wider one makes the GPU, not the daemon, the limit)")
    ap.add_argument("--stages", action="store_true",
                    help="also the unsynchronized stages at 256, 1,024 and 2,048 spectra (as the daemon logs them)")
    ap.add_argument("--stage-sizes", default="1,5,32,4096", help="batch sizes of the synchronized stages")
    ap.add_argument("--merge", choices=("kernel", "sort"), default="kernel",
                    help="wide windows' chunks merged by one kernel (default) or by the reference's CuPy calls")
    ap.add_argument("--cprofile", type=int, default=0, metavar="SIZE",
                    help="only: cProfile 50 batches of SIZE (500 up to 8) and print the top functions by own time")
    ap.add_argument("--burn", type=int, default=0, metavar="N",
                    help="also run N processes that keep a core busy with Python (the daemon's other processes)")
    ap.add_argument("--switch", type=float, default=0.0, metavar="S",
                    help="the GIL's switch interval in seconds (the daemon's: 0.0001; default: Python's)")
    ap.add_argument("--hog", type=float, default=0.0, metavar="SHARE",
                    help="also run a thread that holds the GIL for this share of the time (0-1)")
    args = ap.parse_args()
    backend = get_backend(args.backend)
    index, _ = get_index(args.data, 20_000, args.index_cache, backend.xp)
    pool = [s for r in RUNS for s in load_run(args.data / r) if s.ms_level == 2]
    rng = np.random.default_rng(1)
    rng.shuffle(pool)  # type: ignore[arg-type]
    while len(pool) < 2 * 4096:  # the runs cycled: every batch below is a full one (the engine ignores scans)
        pool = pool + pool
    kw = {} if args.device_choice_min is None else {"device_choice_min": args.device_choice_min}
    search = SearchConfig()
    if args.precursor_tolerance:
        search = dataclasses.replace(search, precursor_tolerance=Tolerance.parse(args.precursor_tolerance))
        print(f"precursor tolerance {search.precursor_tolerance}", flush=True)
    engine = Engine(index, search, backend, fused_preprocess=not args.no_fused, **kw)
    if engine._gpu is not None:
        engine._gpu.merge_kernel = args.merge == "kernel"
    print(f"device preprocessing: {'CuPy calls' if args.no_fused else 'fused kernel'}", flush=True)
    for size in (1, 8, 64, 512, 4096):
        engine.score(SpectraBatch.of(pool[:size]))

    def median_ms(eng: Engine, size: int, reps: int) -> tuple[float, float]:
        times = []
        for r in range(reps):
            i = (r * size * 7) % (len(pool) - size)
            t0 = time.perf_counter()
            eng.score(SpectraBatch.of(pool[i : i + size]))
            times.append(time.perf_counter() - t0)
        a = np.array(times) * 1e3
        return float(np.median(a)), float(np.percentile(a, 99))

    if args.cprofile:
        import cProfile
        import pstats

        size = args.cprofile
        count = 500 if size <= 8 else 50  # small batches: enough of them for each function's share to settle
        batches = [SpectraBatch.of(pool[i * size : (i + 1) * size]) for i in range(count)]
        with cProfile.Profile() as prof:
            for b in batches:
                engine.score(b)
            backend.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return 0
    if args.paced:
        return paced(engine, pool, args.paced, args.seconds)
    if args.switch:
        sys.setswitchinterval(args.switch)
    burners = [multiprocessing.get_context("fork").Process(target=_burn, daemon=True) for _ in range(args.burn)]
    for b in burners:
        b.start()
    if burners:
        print(f"with {len(burners)} processes burning a core each", flush=True)
    if args.hog:
        # a thread that holds the GIL for `hog` of its time in short Python slices, as the daemon's
        # event loop does while it hands chunks to the batcher: what does that cost the engine?
        stop = threading.Event()

        def hog(share: float = args.hog) -> None:
            while not stop.is_set():
                t_end = time.perf_counter() + 50e-6 * share / (1 - share)
                while time.perf_counter() < t_end:
                    pass
                time.sleep(50e-6)

        threading.Thread(target=hog, daemon=True).start()
        print(f"with a GIL hog at {args.hog:.0%}", flush=True)
    threads_list = [int(t) for t in args.threads.split(",")]
    for threads in threads_list:
        for size in [int(x) for x in args.sizes.split(",")]:
            reps = max(4, min(200, 8000 // size))
            times: list[float] = []

            def work(seed: int, reps: int = reps, size: int = size, times: list[float] = times) -> None:
                backend.bind_worker()
                for r in range(reps):
                    i = ((seed * 7 + r) * size) % (len(pool) - size)
                    t0 = time.perf_counter()
                    engine.score(SpectraBatch.of(pool[i : i + size]))
                    times.append(time.perf_counter() - t0)

            ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            wall = time.perf_counter() - t0
            a = np.array(times) * 1e3
            print(f"threads {threads} batch {size:>5}: median {np.median(a):7.2f} ms p99 {np.percentile(a, 99):7.2f} "
                  f"-> {threads * reps * size / wall:>9,.0f} spectra/s", flush=True)
    if backend.is_gpu and args.blocks:
        # threads per count_select block, forced for every batch size (GpuIndex.count_threads)
        gpu = engine._gpu
        saved = gpu.small_block, gpu.large_block
        for size in (1, 8, 32, 256, 1024, 4096):
            row = []
            for block in (256, 512, 1024):
                gpu.small_block = gpu.large_block = block
                engine.score(SpectraBatch.of(pool[:size]))
                row.append(f"{block}: {median_ms(engine, size, max(10, min(100, 4000 // size)))[0]:6.2f} ms")
            print(f"count block, batch {size:>5}: " + ", ".join(row), flush=True)
        gpu.small_block, gpu.large_block = saved
    if backend.is_gpu and args.preprocess:
        # preprocessing on the host vs on the device, same engine otherwise (Engine.host_preprocess_max)
        host = Engine(index, SearchConfig(), backend, host_preprocess_max=1 << 30)
        dev = Engine(index, SearchConfig(), backend, host_preprocess_max=0, fused_preprocess=False)
        fused = Engine(index, SearchConfig(), backend, host_preprocess_max=0)
        for size in (1, 16, 64, 128, 256, 512, 1024, 4096):
            for e in (host, dev, fused):
                e.score(SpectraBatch.of(pool[:size]))
            h, d, f = (median_ms(e, size, 40) for e in (host, dev, fused))
            print(f"preprocess batch {size:>5}: host {h[0]:6.2f} ms (p99 {h[1]:6.2f}), device CuPy calls {d[0]:6.2f} "
                  f"ms (p99 {d[1]:6.2f}), fused kernel {f[0]:6.2f} ms (p99 {f[1]:6.2f})", flush=True)
    if args.stages:
        for size in (256, 1024, 2048):  # stages as the daemon logs them (unsynchronized): comparable with its log
            acc: dict[str, float] = {}
            for r in range(10):
                i = (r * size * 7) % (len(pool) - size)
                for k, v in engine.score(SpectraBatch.of(pool[i : i + size])).stages.items():
                    acc[k] = acc.get(k, 0.0) + v / 10
            print(f"unsynchronized stages batch {size}: total {sum(acc.values()) * 1e3:.2f} ms; "
                  + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in acc.items()), flush=True)
    prof = Engine(index, search, backend, profile=True)  # synchronized stages, the --precursor-tolerance's too
    if prof._gpu is not None:
        prof._gpu.merge_kernel = args.merge == "kernel"
    for size in [int(x) for x in args.stage_sizes.split(",")]:
        prof.score(SpectraBatch.of(pool[:size]))
        prof.stage_seconds.clear()
        for r in range(10):
            i = (r * size * 7) % (len(pool) - size)
            prof.score(SpectraBatch.of(pool[i : i + size]))
        print(f"stages batch {size}: " + ", ".join(f"{k} {v / 10 * 1e3:.2f} ms" for k, v in prof.stage_seconds.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
