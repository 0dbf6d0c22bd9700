"""MS2 files (McDonald et al. 2004) read in bulk, as MGF is (`rtsearch.io.mgf`, `rtsearch.io.peakblocks`).

A spectrum is an ``S`` line (scan, scan, precursor m/z), ``Z`` lines (charge, MH+), ``I`` lines (``RTime`` or
``RetTime`` in minutes), ``D`` lines, then its peak lines (m/z, intensity); ``H`` lines head the file.
pyteomics' MS2 reader drops a trailing empty spectrum, gives no line numbers and is 7.4× slower (4,950 spectra,
19.7 MB: 4.69 s against 0.63 s here; `bench/readers.py`, development machine, bench/BASELINES.md), so MS2 is
parsed here. A block whose peaks are not all plain two-column lines is read line by line, which also finds the
line of an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from rtsearch.errors import InputError
from rtsearch.io.parsing import make_spectrum, one_line, to_float, where
from rtsearch.io.peakblocks import blocks, bounds_of, clean, parse_regions
from rtsearch.types import Spectrum

BLOCK_BYTES = 1 << 24
_ENTRY = re.compile(rb"(?m)^S[ \t]")
_FIRST_PEAK = re.compile(rb"\n(?=[0-9])")


class _Corrupt(Exception):
    def __init__(self, reason: str, offset: int, line: bytes) -> None:
        super().__init__(reason)
        self.reason, self.offset, self.line = reason, offset, line


def _cut(buf: bytes) -> int:
    """Where the last whole spectrum of ``buf`` ends: at the start of its last ``S`` line (-1: none yet)."""
    at = buf.rfind(b"\nS")
    return -1 if at < 0 else at + 1


def read_ms2(path: Path, run: str, defaults: tuple[int, ...]) -> Iterator[Spectrum]:
    """The spectra of an MS2 file in file order; `InputError` names the line of what is corrupt, after the
    spectra before it were given."""
    lines_before, last = 0, None
    with open(path, "rb") as fh:
        for data in blocks(fh.read, _cut, BLOCK_BYTES):
            starts = [m.start() for m in _ENTRY.finditer(data)]
            try:
                if lines_before == 0:
                    _head(data, starts[0] if starts else len(data))
                for spectrum in _spectra(data, starts + [len(data)], run, defaults):
                    last = spectrum.scan
                    yield spectrum
            except _Corrupt as exc:
                line = lines_before + data.count(b"\n", 0, exc.offset) + 1
                text = exc.line.strip()[:40].decode("utf-8", "replace")
                raise InputError(f"{path}: corrupt MS2{where(line, last)}: {exc.reason} in {text!r}") from None
            lines_before += data.count(b"\n")


def _head(data: bytes, stop: int) -> None:
    """The lines before the first spectrum: ``H`` and ``D`` lines and blank ones only."""
    offset = 0
    for raw in data[:stop].split(b"\n"):
        fields = raw.split()
        if fields and fields[0] not in (b"H", b"D"):
            raise _Corrupt("unexpected line before the first S line", offset, raw)
        offset += len(raw) + 1


def _spectra(data: bytes, bounds: list[int], run: str, defaults: tuple[int, ...]) -> Iterator[Spectrum]:
    heads, regions, counts = [], [], []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        first = _FIRST_PEAK.search(data, a, b)
        peaks = first.end() if first else b
        heads.append((a, peaks))
        regions.append((peaks, b))
        counts.append(data.count(b"\n", peaks, b))
    columns = parse_regions(data, regions, sum(counts)) if regions else None
    if columns is not None:
        mz, intensity = columns
        at = bounds_of(counts)
        checked = clean(mz, intensity, at)
    for k, (head, region) in enumerate(zip(heads, regions, strict=True)):
        scan, precursor, charges, rt = _header(data, *head)
        if columns is None:
            peaks_mz, peaks_intensity = _peak_lines(data, *region)
            ok = False
        else:
            peaks_mz, peaks_intensity, ok = mz[at[k] : at[k + 1]], intensity[at[k] : at[k + 1]], checked[k]
        yield make_spectrum(run, scan, 2, peaks_mz, peaks_intensity, precursor, charges, rt, 0.0, defaults,
                            checked=ok and precursor > 0)  # fmt: skip


def _header(data: bytes, start: int, stop: int) -> tuple[int, float, list[int], float]:
    """An entry's ``S``, ``Z``, ``I`` and ``D`` lines: scan, precursor m/z, charges, retention time (s)."""
    scan, precursor, charges, rt = 0, math.nan, [], 0.0
    offset = start
    for raw in data[start:stop].split(b"\n"):
        fields = raw.split()
        try:
            if not fields or fields[0] == b"D":
                pass
            elif fields[0] == b"S":
                scan = int(fields[1])
                precursor = to_float(fields[3]) if len(fields) > 3 else math.nan
            elif fields[0] == b"Z":
                charges.append(int(float(fields[1])))
            elif fields[0] == b"I":
                if len(fields) > 2 and fields[1] in (b"RTime", b"RetTime"):
                    rt = float(fields[2]) * 60.0  # MS2 retention times are minutes
            else:
                _peak(fields)  # a peak line that does not start with a digit: its error
        except (ValueError, IndexError) as exc:
            raise _Corrupt(one_line(exc), offset, raw) from None
        offset += len(raw) + 1
    return scan, precursor, charges, rt


def _peak_lines(data: bytes, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """An entry's peak lines, line by line."""
    peaks, offset = [], start
    for raw in data[start:stop].split(b"\n"):
        fields = raw.split()
        if fields:
            try:
                peaks.append(_peak(fields))
            except (ValueError, IndexError) as exc:
                raise _Corrupt(one_line(exc), offset, raw) from None
        offset += len(raw) + 1
    arr = np.array(peaks, dtype=np.float64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1].astype(np.float32)


def _peak(fields: list[bytes]) -> tuple[float, float]:
    if len(fields) < 2:
        raise ValueError("expected 'm/z intensity'")
    return float(fields[0]), float(fields[1])
