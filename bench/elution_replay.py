"""Elution followed live (`rtsearch.signal.live.ElutionTracker`) on BSA1 replayed scan by scan in acquisition order
(MS1 and MS2 sorted by RT), against the offline result (`rtsearch search --ms1`'s: `rtsearch.signal.precursors`
on the run's MS1 features). Of the MS2 precursors (charge ≥ 2) with an offline feature and followed (one follow a
m/z and charge at a time): the share with an apex event, and the shares whose apex (the apex event's, the end
event's) lies within one MS1 scan of the offline apex, by scan index. One JSON line.

    python bench/elution_replay.py --data ../shared/data [--confirm 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.peers import cpu_model  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.signal.features import detect_features  # noqa: E402
from rtsearch.signal.live import ElutionTracker  # noqa: E402
from rtsearch.signal.precursors import precursor_elution  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--confirm", type=int, default=3, help="points after the apex before its event")
    args = ap.parse_args()
    path = args.data / "bsa-orbitrapxl" / "BSA1.mzML.gz"
    spectra = sorted(read_spectra(path, ms_levels=(1, 2)), key=lambda s: (s.rt, s.ms_level))  # acquisition order
    ms1 = [s for s in spectra if s.ms_level == 1]
    ms2 = [s for s in spectra if s.ms_level == 2 and s.charges and s.charges[0] >= 2]
    apex_off, _ = precursor_elution(detect_features(ms1).cols, np.array([s.precursor_mz for s in ms2]),
                                    np.array([s.charges[0] for s in ms2]), np.array([s.rt for s in ms2]))  # fmt: skip
    offline = {s.scan: a for s, a in zip(ms2, apex_off.tolist(), strict=True) if np.isfinite(a)}
    tracker = ElutionTracker(confirm=args.confirm)
    events: dict[int, dict[str, float]] = {}
    watched = []
    t0 = time.perf_counter()
    for s in spectra:
        if s.ms_level == 1:
            for e in tracker.add_scan(s.run, s.rt, s.mz, s.intensity):
                events.setdefault(e.scan, {})[e.kind] = e.apex_rt
        elif s.scan in offline and tracker.watch(s.run, s.scan, s.precursor_mz, s.charges[0]):
            watched.append(s.scan)
    for e in tracker.end_run(spectra[0].run):
        events.setdefault(e.scan, {})[e.kind] = e.apex_rt
    secs = time.perf_counter() - t0
    ms1_rt = np.array([s.rt for s in ms1])

    def index(rt: float) -> int:
        return int(np.argmin(np.abs(ms1_rt - rt)))

    def share(kind: str) -> float:
        near = [s for s in watched
                if kind in events.get(s, {}) and abs(index(events[s][kind]) - index(offline[s])) <= 1]
        return round(len(near) / len(watched), 4)

    print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
                      "ms2_with_offline_feature": len(offline), "followed": len(watched),
                      "apex_events": round(sum("apex" in events.get(s, {}) for s in watched) / len(watched), 4),
                      "apex_within_one_scan": share("apex"), "end_apex_within_one_scan": share("end"),
                      "given_up": tracker.given_up, "ms1_scans": len(ms1), "seconds": round(secs, 2),
                      "confirm": args.confirm}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
