"""Elution followed live (`rtsearch.signal.live.ElutionTracker`) on BSA1 replayed scan by scan in acquisition order
(MS1 and MS2 sorted by RT), against the offline result (`rtsearch search --ms1`'s: `rtsearch.signal.precursors`
on the run's MS1 features). Of the MS2 precursors (charge ≥ 2) with an offline feature and followed (one follow a
m/z and charge at a time): the share with an apex event, and the shares whose apex (the apex event's, the end
event's) lies within one MS1 scan of the offline apex, by scan index. With ``--identified`` (an `rtsearch search`
results table), the same for the precursors identified there at 1 % FDR: an apex event of the follow of their m/z
and charge (theirs or an earlier scan's), and its apex against their own offline apex; and how many of them have
their offline apex on the run's last MS1 scan (a peak still rising when acquisition stopped: no apex to see
live). With ``--late N`` each MS2 is followed N MS1 scans after it was taken (an answer that lags, as a daemon
replayed faster than it scores answers), placed in its trace by its own retention time as the daemon places it, or
with ``--placed-at-answer`` at the last MS1 scan when followed (what the daemon did before 2026-12-01). One JSON
line.

    python bench/elution_replay.py --data ../shared/data [--confirm 3] [--identified bsa1.tsv] [--late 40]
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
from rtsearch.types import Spectrum  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--confirm", type=int, default=3, help="points after the apex before its event")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--history", type=float, default=300.0, help="seconds of MS1 scans a new follow starts with")
    ap.add_argument("--late", type=int, default=0, help="MS1 scans between an MS2 and its follow")
    ap.add_argument("--placed-at-answer", action="store_true", help="place a follow at its last MS1 scan, not its MS2")
    ap.add_argument("--identified", type=Path, help="rtsearch search results of BSA1 (TSV): report its 1 %% FDR PSMs")
    args = ap.parse_args()
    path = args.data / "bsa-orbitrapxl" / "BSA1.mzML.gz"
    spectra = sorted(read_spectra(path, ms_levels=(1, 2)), key=lambda s: (s.rt, s.ms_level))  # acquisition order
    ms1 = [s for s in spectra if s.ms_level == 1]
    ms2 = [s for s in spectra if s.ms_level == 2 and s.charges and s.charges[0] >= 2]
    apex_off, _ = precursor_elution(detect_features(ms1).cols, np.array([s.precursor_mz for s in ms2]),
                                    np.array([s.charges[0] for s in ms2]), np.array([s.rt for s in ms2]))  # fmt: skip
    offline = {s.scan: a for s, a in zip(ms2, apex_off.tolist(), strict=True) if np.isfinite(a)}
    tracker = ElutionTracker(confirm=args.confirm, history_s=args.history)
    by_scan = {s.scan: s for s in ms2}
    events: dict[int, dict[str, float]] = {}
    watched: list[int] = []
    follows: dict[int, int] = {}  # MS2 scan → the scan whose follow covers its m/z and charge
    pending: list[tuple[int, Spectrum]] = []  # (MS1 scans seen when it is answered, MS2)
    seen = 0

    def follow(s: Spectrum) -> None:
        if tracker.watch(s.run, s.scan, s.precursor_mz, s.charges[0], None if args.placed_at_answer else s.rt):
            watched.append(s.scan)
        follows[s.scan] = next((w for w in reversed(watched) if by_scan[w].charges[0] == s.charges[0]
                                and abs(by_scan[w].precursor_mz - s.precursor_mz) <= 1e-5 * s.precursor_mz),
                               s.scan)  # fmt: skip

    t0 = time.perf_counter()
    for s in spectra:
        if s.ms_level == 1:
            seen += 1
            for e in tracker.add_scan(s.run, s.rt, s.mz, s.intensity):
                events.setdefault(e.scan, {})[e.kind] = e.apex_rt
            for _, m in [p for p in pending if p[0] <= seen]:
                follow(m)
            pending = [p for p in pending if p[0] > seen]
        elif s.scan in offline:
            if args.late:
                pending.append((seen + args.late, s))
            else:
                follow(s)
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

    report: dict[str, object] = {}
    if args.identified:
        ids = identified_scans(args.identified)
        mine = [s for s in ids if s in follows]
        hit = [s for s in mine if "apex" in events.get(follows[s], {})]
        near = [s for s in hit if abs(index(events[follows[s]]["apex"]) - index(offline[s])) <= 1]
        if args.verbose:
            for s in mine:
                e = events.get(follows[s], {})
                print(s, follows[s], round(by_scan[s].precursor_mz, 3), by_scan[s].charges[0], "ms2",
                      index(by_scan[s].rt), "live", index(e["apex"]) if "apex" in e else None, "offline",
                      index(offline[s]), file=sys.stderr)  # fmt: skip
        open_end = [s for s in mine if index(offline[s]) == len(ms1) - 1]  # still rising when the run stopped
        report = {"identified": len(ids), "identified_with_offline_feature": len(mine),
                  "identified_apex_event": len(hit), "identified_apex_within_one_scan": len(near),
                  "identified_offline_apex_on_last_scan": len(open_end)}  # fmt: skip
    print(json.dumps({**report, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
                      "ms2_with_offline_feature": len(offline), "followed": len(watched),
                      "apex_events": round(sum("apex" in events.get(s, {}) for s in watched) / len(watched), 4),
                      "apex_within_one_scan": share("apex"), "end_apex_within_one_scan": share("end"),
                      "given_up": tracker.given_up, "ms1_scans": len(ms1), "seconds": round(secs, 2),
                      "confirm": args.confirm, "late_ms1_scans": args.late,
                      "placed": "at the answer" if args.placed_at_answer else "at the MS2"}))  # fmt: skip
    return 0


def identified_scans(path: Path) -> list[int]:
    """MS2 scans of target PSMs at q ≤ 0.01 in an rtsearch results TSV."""
    import csv

    with open(path, newline="") as fh:
        return sorted({int(r["scan"]) for r in csv.DictReader(fh, delimiter="\t")
                       if r["q_value"] and float(r["q_value"]) <= 0.01 and r["is_decoy"] == "false"})  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
