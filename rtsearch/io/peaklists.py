"""MS2 (a small parser of its own), one spectrum at a time.

pyteomics' MS2 reader drops a trailing empty spectrum and gives no line numbers, so MS2 is parsed here.
MGF has its own module (`rtsearch.io.mgf`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch.errors import InputError
from rtsearch.io.parsing import make_spectrum, one_line, to_float, where
from rtsearch.types import Spectrum


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
