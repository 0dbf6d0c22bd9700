"""Elution of precursors followed live: MS1 scans in, apex and end events out (core logic, no I/O).

`ElutionTracker.watch` starts following a precursor (run, MS2 scan, m/z, charge, the MS2's retention time) — once
per m/z and charge of a run while it is followed (an earlier MS2 of it answered after a later one, before the
apex, moves the follow to the earlier; a late answer's follow is judged at once on the scans already seen, and one
taken while a follow of its m/z ended since was on is not followed again: neither the answers' order nor their
lag changes which follow covers an MS2) — with the run's MS1 scans from
``history_s`` seconds before the MS2 on, the MS2 placed among them by its own time (not by when it was answered:
the tracker keeps the runs' MS1 scans up to ``keep_bytes`` of peaks, so that an answer that lags the scans by any
number of them — a replay faster than real time on a busy machine — is placed and followed as a prompt one is); each
`ElutionTracker.add_scan` adds a point to every followed precursor of the run (its extracted-ion value: the highest
intensity within ``ppm`` of its m/z, 0 if none), smooths all of them at once (the uneven-spacing Savitzky–Golay
smoother, `rtsearch.signal.smoothing`, or its GPU kernel) and returns the events due:

- ``apex``: the peak the MS2 was taken in — of the smoothed trace's peaks (`rtsearch.signal.peaks`, as offline),
  the one whose borders hold the MS2's time (the higher of two when it falls on a border), else the nearest, and
  not lower than the trace at the MS2's time (an MS2 on a peak's rising edge must not take the smoother's ripple
  at its foot for the apex) — has ``confirm`` points after its apex and the last below (1 − ``drop``) × the
  apex: the peak is past its apex (an acquisition can trigger on it);
- ``end``: after the apex, the peak's end is a minimum (the trace rises again after it), or the trace falls to
  ``end_fraction`` × the apex, or the run ends — with the peak's area, and the precursor is no longer followed
  (a dynamic exclusion can be released);

a precursor followed ``give_up_s`` seconds without an apex is dropped (`ElutionTracker.given_up` counts them).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rtsearch.signal.peaks import find_peaks
from rtsearch.signal.smoothing import DEFAULT, Smoothing, smooth


@dataclass(frozen=True)
class ElutionEvent:
    """An ``apex`` or ``end`` of a followed precursor (``rt``: the MS1 scan that showed it)."""

    run: str
    scan: int
    precursor_mz: float
    charge: int
    kind: Literal["apex", "end"]
    apex_rt: float
    apex_intensity: float
    area: float
    rt: float

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run, "scan": self.scan, "precursor_mz": self.precursor_mz, "charge": self.charge,
                "event": self.kind, "apex_rt": self.apex_rt, "apex_intensity": self.apex_intensity,
                "area": self.area, "rt": self.rt}  # fmt: skip


@dataclass
class _Watch:
    scan: int
    mz: float
    charge: int
    since: float
    rt: list[float] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    apex: bool = False


@dataclass
class _Run:
    history: deque[tuple[float, np.ndarray, np.ndarray]] = field(default_factory=deque)
    watches: list[_Watch] = field(default_factory=list)
    bytes: int = 0  # of the history's peaks
    # the ended follows, by charge and m/z bin (of `_bin`): their m/z and until when they were on (RT, seconds)
    ended: dict[tuple[int, int], list[tuple[float, float]]] = field(default_factory=dict)
    pruned: float = -np.inf  # the first scan kept when the ended follows were last let go


class ElutionTracker:
    """Precursors followed through a run's MS1 scans; see the module docstring."""

    def __init__(self, *, ppm: float = 10.0, smoothing: Smoothing = DEFAULT, history_s: float = 300.0,
                 keep_bytes: int = 256 << 20, confirm: int = 3, drop: float = 0.2, end_fraction: float = 0.1,
                 give_up_s: float = 300.0, xp: Any = np) -> None:  # fmt: skip
        self.ppm, self.smoothing, self.history_s, self.keep_bytes = ppm, smoothing, history_s, keep_bytes
        self.confirm, self.drop, self.end_fraction, self.give_up_s = confirm, drop, end_fraction, give_up_s
        self.xp = xp
        self.runs: dict[str, _Run] = {}
        self.given_up = 0
        self._due: list[ElutionEvent] = []  # made due by watches, not yet returned
        self._late_ones: dict[str, list[_Watch]] = {}  # follows placed among scans already seen, not yet judged

    def watch(self, run: str, scan: int, mz: float, charge: int, rt: float | None = None) -> bool:
        """Follow a precursor (``False``: one of its m/z and charge is followed already; from this MS2 on if it was
        taken earlier and that one has no apex yet).

        ``rt``: the MS2's retention time, seconds: it is placed in its trace at the last MS1 scan at or before
        it, however many scans came since (an answer that lags places it where it was taken); None: at the last
        MS1 scan so far (the MS2 has just been taken).
        """
        state = self.runs.setdefault(run, _Run())
        tol = self.ppm * 1e-6 * mz
        taken = float(rt) if rt is not None and np.isfinite(rt) else None  # the MS2's time, if told
        same = next((w for w in state.watches if w.charge == charge and abs(w.mz - mz) <= tol), None)
        if same is not None and taken is not None and not same.apex and taken < same.since:
            # an earlier MS2 of it answered after a later one (a daemon scores by mass, not in acquisition order):
            # followed from the earlier, as if the answers had come in order (the scans since are kept)
            state.watches.remove(same)
            self.watch(run, scan, mz, charge, rt)
            return False
        if same is not None and taken is not None and self._late(same):
            # answered after scans its follow has not been judged on: judged on them first (its events due)
            self._due += self._events(run, state, state.history[-1][0], final=False, only=[same])
        if any(w is same for w in state.watches):
            return False
        ended = (e for k in (-1, 0, 1) for e in state.ended.get((charge, self._bin(mz) + k), ()))
        if taken is not None and any(abs(m - mz) <= tol and taken <= until for m, until in ended):
            return False  # taken while a follow of it, ended since, was still on (a late answer)
        w = _Watch(scan, mz, charge, np.nan)
        if state.history:
            at = state.history[-1][0] if taken is None else taken
            kept: list[tuple[float, np.ndarray, np.ndarray]] = []
            for scan_rt, smz, sint in reversed(state.history):  # the scans from history_s before the MS2 on
                if scan_rt < at - self.history_s:
                    break
                kept.append((scan_rt, smz, sint))
            target = np.array([mz])
            for scan_rt, smz, sint in reversed(kept or [state.history[0]]):
                w.rt.append(scan_rt)
                w.value.append(float(_xic(smz, sint, target, self.ppm)[0]))
            w.since = w.rt[max(int(np.searchsorted(w.rt, at, side="right")) - 1, 0)]
        state.watches.append(w)
        if self._late(w):  # placed among scans already seen: what they show is due now (`due`), not at the next scan
            self._late_ones.setdefault(run, []).append(w)
        return True

    def _bin(self, mz: float) -> int:
        """An m/z's bin (``ppm`` wide, in log m/z): a precursor within ``ppm`` is in its bin or a neighbour."""
        return int(np.log(mz) / (self.ppm * 1e-6))

    @staticmethod
    def _late(w: _Watch) -> bool:
        """Whether the run has MS1 scans after the follow's place (it was answered after them)."""
        return bool(w.rt) and w.rt[-1] > w.since

    def due(self) -> list[ElutionEvent]:
        """The events that watches made due: late answers' follows judged on the scans already seen (all at once);
        the next `add_scans` or `end_run` returns them too."""
        for run, ws in self._late_ones.items():
            state = self.runs[run]  # (a run's own are dropped when its scans or its end judge all its follows)
            on = {id(w) for w in state.watches}  # (one judged since, and ended, is not judged again)
            if ws := [w for w in ws if id(w) in on]:
                self._due += self._events(run, state, state.history[-1][0], final=False, only=ws)
        self._late_ones.clear()
        out, self._due = self._due, []
        return out

    def add_scan(self, run: str, rt: float, mz: np.ndarray, intensity: np.ndarray) -> list[ElutionEvent]:
        """One MS1 scan of ``run`` (m/z ascending); the events it makes due."""
        return self.add_scans(run, [(rt, mz, intensity)])

    def add_scans(self, run: str, scans: list[tuple[float, np.ndarray, np.ndarray]]) -> list[ElutionEvent]:
        """MS1 scans of ``run`` (RT order; each (rt, m/z ascending, intensity)), then the events due after the last:
        one smoothing for all of them (a tracker behind its scans catches up at the cost of one scan)."""
        state = self.runs.setdefault(run, _Run())
        self._late_ones.pop(run, None)  # judged with the others below
        targets = np.array([w.mz for w in state.watches])
        for rt, mz, intensity in scans:
            mz, intensity = np.asarray(mz, np.float64), np.asarray(intensity, np.float64)
            state.history.append((rt, mz, intensity))
            state.bytes += mz.nbytes + intensity.nbytes
            if state.watches:
                for w, v in zip(state.watches, _xic(mz, intensity, targets, self.ppm).tolist(), strict=True):
                    w.rt.append(rt)
                    w.value.append(v)
        self._forget(state)
        last = state.history[-1][0] if state.history else 0.0
        if not state.watches or not scans:
            return self.due()
        return self.due() + self._events(run, state, last, final=False)

    def _forget(self, growing: _Run) -> None:
        """The oldest MS1 scans past ``keep_bytes`` (of all runs): the growing run's first, then the others'."""
        excess = sum(r.bytes for r in self.runs.values()) - self.keep_bytes
        for r in [growing, *(r for r in self.runs.values() if r is not growing)]:
            trimmed = excess > 0 and len(r.history) > 1
            while excess > 0 and len(r.history) > 1:
                _, mz, intensity = r.history.popleft()
                r.bytes -= mz.nbytes + intensity.nbytes
                excess -= mz.nbytes + intensity.nbytes
            # the ended follows over before the scans kept, let go once every ``history_s`` of them (not every scan:
            # one kept longer only holds back a follow that could not be placed among the scans anyway)
            if trimmed and r.history[0][0] - r.pruned >= self.history_s:
                first = r.pruned = r.history[0][0]
                r.ended = {k: kept for k, v in r.ended.items() if (kept := [e for e in v if e[1] >= first])}
            if excess <= 0:
                return

    def end_run(self, run: str) -> list[ElutionEvent]:
        """The run's last events (an ``end`` for every precursor past its apex); the run is forgotten."""
        state = self.runs.pop(run, None)
        self._late_ones.pop(run, None)  # judged with the others below
        if state is None or not state.watches:
            return self.due()
        return self.due() + self._events(run, state, state.watches[0].rt[-1] if state.watches[0].rt else 0.0,
                                         final=True)  # fmt: skip

    def _events(self, run: str, state: _Run, now: float, *, final: bool,
                only: list[_Watch] | None = None) -> list[ElutionEvent]:  # fmt: skip
        """The events due of the run's follows (``only`` these), ended ones let go."""
        ws = [w for w in (state.watches if only is None else only) if w.rt]
        sizes = np.array([len(w.rt) for w in ws], np.int64)
        offsets = np.r_[0, np.cumsum(sizes)]
        rt = np.concatenate([w.rt for w in ws]) if ws else np.zeros(0)
        raw = np.concatenate([w.value for w in ws]) if ws else np.zeros(0)
        if self.xp is np:
            y = smooth(rt, raw, offsets, self.smoothing)
        else:
            from rtsearch.signal.gpu import smooth_gpu

            y = self.xp.asnumpy(smooth_gpu(self.xp, rt, raw, offsets, self.smoothing))
        pk = find_peaks(rt, y, offsets, fwhm=False)  # cut at valleys a tenth deep (find_peaks default)
        first = np.searchsorted(pk.trace, np.arange(len(ws) + 1))
        out: list[ElutionEvent] = []
        done: set[int] = set()
        for k, w in enumerate(ws):
            if np.isnan(w.since):
                w.since = float(w.rt[0])
            a, b = int(offsets[k]), int(offsets[k + 1])
            at = a + min(int(np.searchsorted(rt[a:b], w.since)), b - a - 1)  # the MS2's place in the trace
            mine = np.arange(first[k], first[k + 1])  # this trace's peaks (peaks come in row order)
            if mine.size == 0:
                if now - w.since > self.give_up_s:
                    done.add(id(w))
                    self.given_up += 1
                continue
            inside = mine[(pk.start[mine] <= at) & (pk.end[mine] >= at)]
            if inside.size:  # two when the MS2 fell on a border: the higher
                p = int(inside[np.argmax(y[pk.apex[inside]])])
            else:
                p = int(mine[np.argmin(np.abs(rt[pk.apex[mine]] - rt[at]))])
            top, stop, peak = int(pk.apex[p]), int(pk.end[p]), float(y[pk.apex[p]])
            if peak < y[at]:  # the MS2 saw more than this "apex": a ripple at a rising peak's foot, not its top
                if now - w.since > self.give_up_s:
                    done.add(id(w))
                    self.given_up += 1
                continue
            closed = stop < b - 1 or y[b - 1] <= self.end_fraction * peak  # a minimum after it, or low enough
            if not w.apex and b - 1 - top >= self.confirm and y[b - 1] < (1 - self.drop) * peak:
                w.apex = True
                out.append(ElutionEvent(run, w.scan, w.mz, w.charge, "apex", float(rt[top]), peak, 0.0, now))
            if w.apex and (closed or final):
                out.append(ElutionEvent(run, w.scan, w.mz, w.charge, "end", float(rt[top]), peak, float(pk.area[p]),
                                        now))  # fmt: skip
                done.add(id(w))
                # on until the first scan past the peak's end or at its end fraction (where a prompt follow ends)
                low = np.flatnonzero((np.arange(top, b) > stop) | (y[top:b] <= self.end_fraction * peak))
                until = float(rt[top + int(low[0])] if low.size else rt[b - 1])
                state.ended.setdefault((w.charge, self._bin(w.mz)), []).append((w.mz, until))
            elif not w.apex and now - w.since > self.give_up_s:
                done.add(id(w))
                self.given_up += 1
        state.watches = [w for w in state.watches if id(w) not in done]
        return out


def _xic(mz: np.ndarray, intensity: np.ndarray, targets: np.ndarray, ppm: float) -> np.ndarray:
    """The highest intensity within ``ppm`` of each target in one scan (0 where none)."""
    lo = np.searchsorted(mz, targets * (1 - ppm * 1e-6))
    hi = np.searchsorted(mz, targets * (1 + ppm * 1e-6), side="right")
    out = np.zeros(targets.shape[0])
    some = np.flatnonzero(hi > lo)
    if some.size:
        ext = np.r_[intensity, 0.0]
        out[some] = np.maximum.reduceat(ext, np.stack([lo[some], hi[some]], axis=1).ravel())[::2]
    return out
