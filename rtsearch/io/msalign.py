"""msalign: deconvoluted top-down spectra (neutral monoisotopic masses), as TopFD, FLASHDeconv and IsoDec write them.

One ``BEGIN IONS`` … ``END IONS`` entry per spectrum: ``KEY=value`` lines, then one peak a line —
``mass intensity charge`` and, from IsoDec, a fourth column (read past). The layouts in use differ in their
keys, not their grammar:

- TopFD 1.6: ``#`` parameter lines before the first entry, ``ID=`` (0-based), ``PRECURSOR_MASS=0`` when no
  precursor was found;
- TopFD 1.7+, FLASHDeconv (FLASHApp), IsoDec: ``SPECTRUM_ID=`` and ``TITLE=``, and several precursors of
  one isolation window as ``:``-separated values (``PRECURSOR_MZ=1001.2:1402.7``, ``PRECURSOR_CHARGE=5:7``,
  ``PRECURSOR_MASS=…``, ``PRECURSOR_INTENSITY=…``).

No maintained Python library reads msalign (TopPIC's reader is C++), and these files are small (a few
thousand spectra), so this one reads line by line. A spectrum that can be read but not searched (no
precursor mass, no peaks, a mass ≤ 0) is still given, its ``problem`` saying why; a structurally broken file
(cut inside an entry, a peak line that does not parse, text between entries) raises `InputError` naming the
file, the line and the last scan read.
"""

from __future__ import annotations

import gzip
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch.errors import InputError
from rtsearch.io.parsing import where
from rtsearch.types import DeconvolutedSpectrum, Precursor

_DIGITS = re.compile(r"\d+")


def read_msalign(path: str | Path, *, ms_levels: tuple[int, ...] = (2,)) -> Iterator[DeconvolutedSpectrum]:
    """The spectra of an msalign file (plain or ``.gz``) of ``ms_levels``, in file order, one at a time.

    Parameters
    ----------
    path : str or Path
        The msalign file; its run name is the file name without ``.msalign`` (and ``_ms1``/``_ms2``).
    ms_levels : tuple of int
        Levels to give (``LEVEL=``; an entry without one is MS2 when it has a precursor, else MS1).

    Raises
    ------
    InputError
        At once for a file that cannot be read; while iterating for a broken one.
    """
    p = Path(path)
    opener: Any = gzip.open if p.name.lower().endswith(".gz") else open
    try:
        with open(p, "rb"):
            pass
    except OSError as exc:
        raise InputError(f"{p}: cannot read msalign file: {exc.strerror or exc}") from None
    with opener(p, "rt", encoding="utf-8", errors="replace") as fh:
        yield from _entries(p, fh, run_of(p), frozenset(ms_levels))


def run_of(path: Path) -> str:
    """``JurkatTopDownRep2Fract1_ms2.msalign`` → ``JurkatTopDownRep2Fract1``."""
    name = re.sub(r"\.msalign(\.gz)?$", "", path.name, flags=re.I)
    return re.sub(r"_ms[12]$", "", name) or name


def _entries(path: Path, lines: Iterator[str], run: str, levels: frozenset[int]) -> Iterator[DeconvolutedSpectrum]:
    last: int | None = None
    params: dict[str, str] | None = None  # inside an entry: its parameters so far
    peaks: list[str] = []
    at: list[int] = []  # the peaks' line numbers
    start, number = 0, 0
    try:
        for lineno, raw in enumerate(lines, 1):
            line = raw.strip()
            if params is None:
                if line == "BEGIN IONS":
                    params, peaks, at, start, number = {}, [], [], lineno, number + 1
                elif line and not line.startswith("#"):
                    raise _Broken(lineno, f"expected BEGIN IONS, got {line[:40]!r}")
                continue
            if line == "END IONS":
                spectrum = _spectrum(run, params, peaks, at, number)
                last, params = spectrum.scan, None
                if spectrum.ms_level in levels:
                    yield spectrum
            elif line == "BEGIN IONS":
                raise _Broken(lineno, "BEGIN IONS inside an entry (an END IONS is missing)")
            elif line and (line[0].isdigit() or line[0] in "-+."):
                peaks.append(line)
                at.append(lineno)
            elif "=" in line:
                key, _, value = line.partition("=")
                if peaks:
                    raise _Broken(lineno, f"parameter {key.strip()!r} after the peaks")
                params[key.strip().upper()] = value.strip()
            elif line and not line.startswith("#"):
                raise _Broken(lineno, f"expected KEY=value or a peak, got {line[:40]!r}")
        if params is not None:
            raise _Broken(start, "file ends inside this entry (truncated?)")
    except _Broken as exc:
        raise InputError(f"{path}: corrupt msalign{where(exc.lineno, last)}: {exc.reason}") from None
    except UnicodeDecodeError as exc:  # a gzip member of bytes that are not text
        raise InputError(f"{path}: corrupt msalign{where(None, last)}: {exc.reason}") from None
    except (OSError, EOFError) as exc:  # a truncated or broken .gz
        raise InputError(f"{path}: cannot read msalign{where(None, last)}: {exc}") from None


class _Broken(Exception):
    def __init__(self, lineno: int, reason: str) -> None:
        super().__init__(reason)
        self.lineno, self.reason = lineno, reason


def _spectrum(run: str, params: dict[str, str], peaks: list[str], at: list[int], number: int) -> DeconvolutedSpectrum:
    """One entry (the ``number``-th of its file; ``at``: its peaks' lines) as a spectrum."""
    problems: list[str] = []
    mass, intensity, charge = _peaks(peaks, at)
    precursors = _precursors(params, problems)
    level = _int(params.get("LEVEL"), 2 if precursors or "PRECURSOR_MASS" in params else 1)
    if level >= 2 and not precursors:
        problems.append("no precursor mass")
    if mass.size == 0:
        problems.append("no peaks")
    elif not (mass > 0).all() or not np.isfinite(mass).all():
        problems.append("fragment masses not all finite and > 0")
    order = np.argsort(mass, kind="stable")
    ident = params.get("SPECTRUM_ID", params.get("ID", ""))
    m = _DIGITS.search(params.get("SCANS", ""))
    scan = int(m.group()) if m else (_int(ident, number - 1) + 1)
    rt = _float(params.get("RETENTION_TIME"), 0.0)
    return DeconvolutedSpectrum(
        run=run, scan=scan, ms_level=level, mass=mass[order], intensity=intensity[order], charge=charge[order],
        precursors=precursors, rt=rt if math.isfinite(rt) else 0.0, spectrum_id=ident,
        title=params.get("TITLE", ""), activation=params.get("ACTIVATION", ""),
        ms1_scan=_int(params.get("MS_ONE_SCAN"), -1), problem="; ".join(problems),
    )  # fmt: skip


def _peaks(lines: list[str], at: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Peak lines → masses (float64), intensities (float32), charges (int16); `_Broken` names a bad line."""
    if not lines:
        return np.zeros(0), np.zeros(0, np.float32), np.zeros(0, np.int16)
    fields = [ln.split() for ln in lines]
    width = len(fields[0])
    try:
        if width >= 3 and all(len(f) == width for f in fields):
            table = np.array(fields, dtype=np.float64)  # every line the same columns: one conversion
            return table[:, 0], table[:, 1].astype(np.float32), table[:, 2].astype(np.int16)
    except ValueError:
        pass
    out = np.zeros((len(lines), 3))
    for k, f in enumerate(fields):  # the slow way, to name the line at fault
        try:
            if len(f) < 3:
                raise ValueError(f"expected 'mass intensity charge', got {lines[k][:40]!r}")
            out[k] = float(f[0]), float(f[1]), float(f[2])
        except ValueError as exc:
            raise _Broken(at[k], str(exc)) from None
    return out[:, 0], out[:, 1].astype(np.float32), out[:, 2].astype(np.int16)


def _precursors(params: dict[str, str], problems: list[str]) -> tuple[Precursor, ...]:
    """The entry's precursors (``:``-separated for several), those with a mass > 0."""
    split = {k: params.get(k, "").split(":") for k in ("PRECURSOR_MASS", "PRECURSOR_MZ", "PRECURSOR_CHARGE",
                                                       "PRECURSOR_INTENSITY")}  # fmt: skip
    masses = split["PRECURSOR_MASS"]
    if any(len(v) not in (1, len(masses)) for k, v in split.items() if params.get(k)):
        problems.append("precursor fields of different lengths")
        return ()
    out = []
    for k, text in enumerate(masses):
        mass = _float(text, math.nan)
        if math.isfinite(mass) and mass > 0:
            out.append(Precursor(mass=mass, mz=_float(_kth(split["PRECURSOR_MZ"], k), 0.0),
                                 charge=_int(_kth(split["PRECURSOR_CHARGE"], k), 0),
                                 intensity=_float(_kth(split["PRECURSOR_INTENSITY"], k), 0.0)))  # fmt: skip
    return tuple(out)


def _kth(values: list[str], k: int) -> str:
    """The ``k``-th of a ``:``-separated field, or its one value for every precursor."""
    return values[k] if k < len(values) and len(values) > 1 else values[0]


def _float(text: str | None, default: float) -> float:
    try:
        return float(text) if text else default
    except ValueError:
        return default


def _int(text: str | None, default: int) -> int:
    try:
        return int(float(text)) if text else default
    except (ValueError, OverflowError):
        return default
