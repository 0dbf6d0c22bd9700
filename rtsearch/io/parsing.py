"""What the spectrum readers share: a `Spectrum` from what a file gave, and error text that fits one line."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rtsearch.types import Spectrum


def one_line(exc: object) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def where(lineno: int | None, last: int | None) -> str:
    where = f" at line {lineno}" if lineno and lineno > 0 else ""
    return where + (f" after scan {last}" if last is not None else "")


def to_float(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def make_spectrum(run: str, scan: int, level: int, mz: Any, intensity: Any, precursor_mz: float,
                  charges: Sequence[Any], rt: float, precursor_intensity: float,
                  defaults: tuple[int, ...], problem: str = "", *, checked: bool = False,
                  native_id: str = "") -> Spectrum:
    """Build a `Spectrum`, sorting peaks and recording why it cannot be scored.

    ``checked``: the caller found the peaks as many on each side, non-empty, finite, non-negative and sorted
    (a reader that checks a whole block of spectra at once: `rtsearch.io.mgf`)."""
    mz = np.asarray(mz, dtype=np.float64)
    intensity = np.asarray(intensity, dtype=np.float32)
    problems = [problem] if problem else []
    if not checked and mz.shape != intensity.shape:
        problems.append(f"mismatched array lengths (m/z {mz.size}, intensity {intensity.size})")
        n = min(mz.size, intensity.size)
        mz, intensity = mz[:n], intensity[:n]
    if not problem and not checked:
        if mz.size == 0:
            problems.append("empty spectrum")
        elif not (np.isfinite(mz).all() and np.isfinite(intensity).all()):
            problems.append("non-finite peak values")
        elif (intensity < 0).any():
            problems.append("negative intensities")
    if not checked and mz.size > 1 and (np.diff(mz) < 0).any():
        order = np.argsort(mz, kind="stable")
        mz, intensity = mz[order], intensity[order]
    if not math.isfinite(precursor_mz):
        precursor_mz = 0.0
    if level >= 2 and precursor_mz <= 0 and "PEPMASS" not in problem:
        problems.append("missing precursor m/z")
    found: list[int] = []
    for c in charges:
        z = to_float(c)
        if math.isfinite(z) and z != 0 and int(z) not in found:
            found.append(int(z))
    return Spectrum(run=run, scan=scan, ms_level=level, mz=mz, intensity=intensity,
                    precursor_mz=float(precursor_mz), charges=tuple(found) or defaults,
                    rt=rt if math.isfinite(rt) else 0.0,
                    precursor_intensity=precursor_intensity if math.isfinite(precursor_intensity)
                    else 0.0, problem="; ".join(problems), native_id=native_id or f"scan={scan}")
