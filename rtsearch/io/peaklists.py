"""MGF (through `pyteomics.mgf`) and MS2 (a small parser of its own), one spectrum at a time.

pyteomics' MS2 reader drops a trailing empty spectrum and gives no line numbers,
so MS2 is parsed here; MGF errors are reported with the entry and line.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
from pyteomics import mgf

from rtsearch.errors import InputError
from rtsearch.io.parsing import make_spectrum, one_line, to_float, where
from rtsearch.types import Spectrum

_TITLE_SCAN_RE = re.compile(r"scan=(\d+)", re.I)


class _Lines:
    """A text file iterated line by line, counting lines (for error messages)."""

    def __init__(self, fh: IO[str]) -> None:
        self._fh, self.name, self.lineno = fh, fh.name, 0

    def tell(self) -> int:
        return self._fh.tell()

    def seek(self, pos: int) -> int:  # pyteomics rewinds after reading the header
        self.lineno = 0 if pos == 0 else -1  # -1: unknown
        return self._fh.seek(pos)

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self._fh)
        self.lineno += 1
        return line


def read_mgf(path: Path, run: str, defaults: tuple[int, ...]) -> Iterator[Spectrum]:
    last: int | None = None
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = _Lines(fh)
        entries: Iterator[dict[str, Any]] | None = None
        for entry in itertools.count(1):
            try:
                if entries is None:
                    entries = iter(mgf.MGF(lines, use_header=True, convert_arrays=1,
                                           read_charges=False))
                item = next(entries)
                if item is None:  # pyteomics yields None at end of file inside an entry
                    raise ValueError("file ends inside an entry (truncated?)")
            except StopIteration:
                return
            except Exception as exc:  # pyteomics raises PyteomicsError, IndexError, ValueError
                reason = one_line(getattr(exc, "message", exc))  # PyteomicsError.message
                raise InputError(f"{path}: corrupt MGF in entry {entry}"
                                 f"{where(lines.lineno, last)}: {reason}") from None
            params: dict[str, Any] = item["params"]
            title = str(params.get("title", ""))
            m = re.search(r"\d+", str(params.get("scans", ""))) or _TITLE_SCAN_RE.search(title)
            scan = int(m.group(m.re.groups)) if m else entry
            pepmass = params.get("pepmass")
            problem = ""
            if pepmass is None:
                problem = f"MGF entry {entry} has no PEPMASS"
                problem += f" (TITLE={title})" if title else ""
                pepmass = (math.nan, None)
            charge = params.get("charge")
            charges = list(charge) if isinstance(charge, list | tuple) else [charge]
            yield make_spectrum(run, scan, 2, item["m/z array"], item["intensity array"],
                            to_float(pepmass[0]), [c for c in charges if c is not None],
                            to_float(params.get("rtinseconds", 0.0)),
                            to_float(pepmass[1]) if pepmass[1] is not None else 0.0, defaults,
                            problem)
            last = scan


def read_ms2(path: Path, run: str, defaults: tuple[int, ...]) -> Iterator[Spectrum]:
    last: int | None = None
    cur: dict[str, Any] | None = None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            fields = line.split()
            if not fields or fields[0] == "H" or fields[0] == "D":
                continue
            try:
                if fields[0] == "S":
                    if cur is not None:
                        yield _ms2make_spectrum(cur, run, defaults)
                        last = cur["scan"]
                    prec = to_float(fields[3]) if len(fields) > 3 else math.nan
                    cur = {"scan": int(fields[1]), "prec": prec, "z": [], "rt": 0.0, "peaks": []}
                elif cur is None:
                    raise ValueError("unexpected line before the first S line")
                elif fields[0] == "Z":
                    cur["z"].append(int(float(fields[1])))
                elif fields[0] == "I":
                    if len(fields) > 2 and fields[1] in ("RTime", "RetTime"):
                        cur["rt"] = float(fields[2]) * 60.0  # MS2 retention times are minutes
                elif len(fields) < 2:
                    raise ValueError("expected 'm/z intensity'")
                else:
                    cur["peaks"].append((float(fields[0]), float(fields[1])))
            except (ValueError, IndexError) as exc:
                raise InputError(f"{path}: corrupt MS2{where(lineno, last)}: {one_line(exc)} "
                                 f"in {line.strip()[:40]!r}") from None
    if cur is not None:
        yield _ms2make_spectrum(cur, run, defaults)


def _ms2make_spectrum(cur: dict[str, Any], run: str, defaults: tuple[int, ...]) -> Spectrum:
    peaks = np.array(cur["peaks"], dtype=np.float64).reshape(-1, 2)
    return make_spectrum(run, cur["scan"], 2, peaks[:, 0], peaks[:, 1], cur["prec"], cur["z"],
                     cur["rt"], 0.0, defaults)
