"""mzXML (plain or ``.gz``; Pedrioli et al. 2004), parsed with lxml directly, one scan at a time.

Scans may nest (an MS2 scan inside the MS1 scan it was taken from, as older converters wrote them): a nested
scan is given after the scan that holds it, so spectra come in acquisition order. Peaks are base64, 32 or 64
bit, network byte order, m/z and intensity interleaved, zlib-compressed or not; retention time is an
``xs:duration`` (``PT12.5S``).

Written here rather than through `pyteomics.mzxml` for the errors and order the other readers give (the file,
line and last scan of a corrupt file; nested scans after their parent) and for speed: 50,000 spectra (1.3 GB)
in 6.72 s against pyteomics' 9.66 s (`bench/readers.py`, development machine, docs/history/RESULTS.md).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import math
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch.io.mzml import release, xml_events
from rtsearch.io.parsing import make_spectrum, one_line, to_float
from rtsearch.types import Spectrum

_NUM = r"(\d+(?:\.\d*)?)"
_DURATION = re.compile(rf"^\s*-?P(?:{_NUM}D)?(?:T(?:{_NUM}H)?(?:{_NUM}M)?(?:{_NUM}S)?)?\s*$")  # xs:duration


def rt_seconds(text: str | None) -> float:
    """An ``xs:duration`` (``PT1M2.5S``) or plain number of seconds, in seconds (NaN: neither)."""
    if not text:
        return math.nan
    m = _DURATION.match(text)
    if m is None:
        return to_float(text)
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def _peaks(elem: Any) -> tuple[np.ndarray, np.ndarray, str]:
    """A ``peaks`` element's m/z and intensity, and the problem if they cannot be read."""
    if elem is None or not (elem.text or "").strip():
        return np.empty(0), np.empty(0), ""
    precision = elem.get("precision", "32")
    if precision not in ("32", "64"):
        return np.empty(0), np.empty(0), f"unknown peak precision {precision!r}"
    order = elem.get("pairOrder") or elem.get("contentType") or "m/z-int"
    if order not in ("m/z-int", "m/z int"):
        return np.empty(0), np.empty(0), f"unsupported peak content {order!r}"
    dtype = (">" if elem.get("byteOrder", "network") == "network" else "<") + ("f4" if precision == "32" else "f8")
    try:
        raw = base64.b64decode(elem.text.strip())
        if elem.get("compressionType", "none") == "zlib":
            raw = zlib.decompress(raw)
        values = np.frombuffer(raw, dtype=dtype)
    except (binascii.Error, zlib.error, ValueError) as exc:
        return np.empty(0), np.empty(0), f"undecodable peaks ({one_line(exc)})"
    if values.size % 2:
        return np.empty(0), np.empty(0), "an odd number of peak values"
    return values[0::2].astype(np.float64), values[1::2].astype(np.float32), ""


def _spectrum(elem: Any, run: str, defaults: tuple[int, ...]) -> tuple[int, int, Spectrum]:
    scan = int(to_float(elem.get("num")) if math.isfinite(to_float(elem.get("num"))) else 0)
    level = int(to_float(elem.get("msLevel", "1")))
    prec = elem.find("{*}precursorMz")
    precursor_mz, precursor_int, charges = math.nan, 0.0, []
    if prec is not None:
        precursor_mz = to_float((prec.text or "").strip())
        precursor_int = to_float(prec.get("precursorIntensity", "0"))
        charges = [c for c in (prec.get("precursorCharge") or "").replace(",", " ").split() if c]
    mz, intensity, problem = _peaks(elem.find("{*}peaks"))
    rt = rt_seconds(elem.get("retentionTime"))
    return scan, level, make_spectrum(run, scan, level, mz, intensity, precursor_mz, charges, rt, precursor_int,
                                      defaults, problem)  # fmt: skip


def read_mzxml(path: Path, run: str, defaults: tuple[int, ...], levels: frozenset[int], gz: bool) -> Iterator[Spectrum]:
    """The spectra of ``levels`` in an mzXML file, in acquisition order; `InputError` for a corrupt file, naming
    the line and the last scan read."""
    last: int | None = None
    held: list[list[Spectrum]] = []  # per open scan element, the nested scans read inside it
    with (gzip.open if gz else open)(path, "rb") as fh:
        scans = xml_events(fh, path, "mzXML", lambda: last, events=("start", "end"), tag="{*}scan")
        for event, elem in scans:  # `last` is read when an error comes: the scan read last
            if event == "start":
                held.append([])
                continue
            last, level, spectrum = _spectrum(elem, run, defaults)
            inner = held.pop()
            out = ([spectrum] if level in levels else []) + inner
            if held:  # nested: given after the scan that holds it
                elem.clear(keep_tail=True)
                held[-1].extend(out)
            else:
                release(elem, keep_tail=True)
                yield from out
