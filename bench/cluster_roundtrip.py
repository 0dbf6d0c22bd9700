"""A cluster batch's round trip against its worker's own time: what the door, the sockets and the worker's loop
add to a batch (`rtsearch.cluster.door`, `rtsearch.cluster.worker`), on the bundled demo index, NumPy.

One local worker process; batches of ``--sizes`` spectra of the bundled run scored one after the other through the
door (``ClusterScorer.score``), the same batches in this process (``target.score``) beside: medians of the round trip,
of the worker's own scoring time (its reply's ``scoring`` stage) and of the in-process time, and the overhead (round
trip less the worker's own). ``--code DIR`` imports rtsearch from another checkout (say ``git archive C | tar -x``)
to compare two versions on the same machine, one run after the other. ``--hog S`` runs a thread beside that holds
the GIL (pure Python) S of every 10 ms, as a busy daemon's event loop and results thread do, under the GIL switch
interval ``--switch`` (seconds; the daemon's is 1 ms with its engine elsewhere, `rtsearch.serve.runtime`): each
hand-over in the round trip (engine thread → the door's dispatcher thread → back) then waits for the GIL. Each
size also prints the medians of a batch's legs through the door (`_stamp_legs`).

    python bench/cluster_roundtrip.py [--sizes 1,16,64] [--batches 40] [--code DIR] [--hog 0.5 --switch 0.001]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,16,64", help="spectra a batch, comma-separated")
    ap.add_argument("--batches", type=int, default=40, help="batches a size")
    ap.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1], help="the checkout to measure")
    ap.add_argument("--hog", type=float, default=0.0, help="share of the time a thread beside holds the GIL (0-1)")
    ap.add_argument("--switch", type=float, default=0.0, help="the GIL switch interval, s (0: Python's default)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "rtsearch-roundtrip")
    args = ap.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    import numpy as np

    from rtsearch.batch import SpectraBatch
    from rtsearch.cli.demo import RUN, TOML, bundled, cached_index
    from rtsearch.cluster.door import ClusterScorer
    from rtsearch.cluster.placement import LocalPlacement
    from rtsearch.config import load_config
    from rtsearch.io.spectra import read_spectra
    from rtsearch.scoring.backend import get_backend
    from rtsearch.search.database import DatabaseTarget

    legs = _stamp_legs(ClusterScorer)
    if args.switch > 0:
        sys.setswitchinterval(args.switch)
    stop = threading.Event()
    if args.hog > 0:
        threading.Thread(target=_hog, args=(args.hog, stop), daemon=True).start()
    index, _ = cached_index(args.cache)
    target = DatabaseTarget(index, load_config(bundled(TOML)).search, get_backend("numpy"))
    ms2 = [s for s in read_spectra(bundled(RUN)) if s.ms_level == 2]
    for n in map(int, args.sizes.split(",")):
        batches = [SpectraBatch.of(ms2[k : k + n]) for k in range(0, len(ms2) - n, n)][: args.batches]
        trip, own, alone = [], [], []
        with ClusterScorer(target.reopen("numpy"), LocalPlacement(), workers=1, timeout_s=30) as cluster:
            cluster.score(batches[0])
            for stamps in legs.values():
                stamps.clear()
            for b in batches:
                t = time.perf_counter()
                scored = cluster.score(b)
                trip.append(time.perf_counter() - t)
                own.append(scored.stages["scoring"])
                t = time.perf_counter()
                target.score(b)
                alone.append(time.perf_counter() - t)
        med = {k: 1e3 * float(np.median(v)) for k, v in (("trip", trip), ("own", own), ("alone", alone))}
        print(
            f"{args.code.name} (hog {args.hog:g}, switch {sys.getswitchinterval() * 1e3:g} ms): n={n}: round trip "
            f"{med['trip']:.2f} ms, worker's own {med['own']:.2f} ms, in process {med['alone']:.2f} ms; overhead "
            f"{med['trip'] - med['own']:.2f} ms",
            flush=True,
        )
        k = min(map(len, legs.values()))  # the legs of each batch through the door (one batch at a time)
        at = np.array([legs[name][:k] for name in LEGS], dtype=np.int64)
        print("    legs, median µs: " + ", ".join(f"{LEGS[j]} -> {LEGS[j + 1]} {np.median(at[j + 1] - at[j]) / 1e3:.0f}"
                                                   for j in range(len(LEGS) - 1)), flush=True)  # fmt: skip


LEGS = ("engine thread asks", "dispatcher sends", "dispatcher has the reply", "engine thread has it")


def _stamp_legs(door: Any) -> dict[str, list[int]]:
    """`ClusterScorer`'s methods wrapped to stamp each batch's legs (`LEGS`): asked (``_request``), sent to its
    worker by the dispatcher thread (``_send`` of a batch), its reply taken by the dispatcher (``_from_worker`` of a
    reply), handed to the engine thread (``_wait`` returns)."""
    from stamps import stamp

    legs: dict[str, list[int]] = {name: [] for name in LEGS}
    stamp(door, "_request", legs[LEGS[0]])
    stamp(door, "_send", legs[LEGS[1]], when=lambda name, frames: frames[:1] == [b"batch"])
    stamp(door, "_from_worker", legs[LEGS[2]], when=lambda frames, now: frames[1:2] == [b"scored"])
    stamp(door, "_wait", legs[LEGS[3]], after=True)
    return legs


def _hog(share: float, stop: threading.Event) -> None:
    """Hold the GIL (a pure-Python loop) ``share`` of every 10 ms, sleep the rest."""
    while not stop.is_set():
        end = time.perf_counter() + 0.01 * share
        while time.perf_counter() < end:
            pass
        time.sleep(0.01 * (1 - share))


if __name__ == "__main__":
    main()
