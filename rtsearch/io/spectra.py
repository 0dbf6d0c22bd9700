"""Read spectra lazily from mzML (plain or ``.gz``), MGF and MS2 files.

Every reader is a generator that holds one spectrum at a time. A spectrum that
can be read but not scored is still yielded, with `Spectrum.problem` saying
why; a structurally corrupt file raises `InputError` (one line naming the file
and, where known, the line and the last scan read).

mzML is parsed with lxml directly: pyteomics 5 needs ``psims`` (and the PSI-MS
vocabulary) for mzML, and the few cvParams needed here are fixed accessions.
MGF goes through `pyteomics.mgf`; MS2 has its own small parser, since
pyteomics' one drops a trailing empty spectrum and gives no line numbers.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import itertools
import math
import re
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from lxml import etree
from pyteomics import mgf

from rtsearch.errors import InputError
from rtsearch.types import Spectrum

_SUFFIXES = (".mzml.gz", ".mzml", ".mgf", ".ms2")
_TIME_FACTOR = {"UO:0000010": 1.0, "second": 1.0, "UO:0000031": 60.0, "minute": 60.0,
                "UO:0000032": 3600.0, "hour": 3600.0, "UO:0000028": 1e-3, "millisecond": 1e-3}
_DTYPES = {"MS:1000521": "<f4", "MS:1000523": "<f8", "MS:1000519": "<i4", "MS:1000522": "<i8"}
_NUMPRESS = {"MS:1002312", "MS:1002313", "MS:1002314", "MS:1002746", "MS:1002747", "MS:1002748"}
_SCAN_RE = re.compile(r"(?:^|\s)(?:scan|scanId|spectrum)=(\d+)")  # nativeID forms
_TITLE_SCAN_RE = re.compile(r"scan=(\d+)", re.I)
_COUNT_PATTERN = {".mgf": b"BEGIN IONS", ".ms2": b"\nS", ".mzml": b"<precursorList",
                  ".mzml.gz": b"<precursorList"}
_Params = dict[str, tuple[str, str]]  # accession -> (value, unit accession or name)


def run_name(path: str | Path) -> str:
    """Return the file name of ``path`` without its spectrum-file extension.

    Parameters
    ----------
    path : str or Path
        A spectrum file, e.g. ``"data/BSA1.mzML.gz"``.

    Returns
    -------
    str
        The run name, e.g. ``"BSA1"``; the plain file name for other extensions.
    """
    name = Path(path).name
    return name[: len(name) - len(_suffix(name))] or name


def _suffix(name: str) -> str:
    return next((s for s in _SUFFIXES if name.lower().endswith(s)), "")


def read_spectra(
    path: str | Path,
    *,
    default_charges: tuple[int, ...] = (),
    ms_levels: tuple[int, ...] = (2,),
) -> Iterator[Spectrum]:
    """Iterate over the spectra of an mzML, mzML.gz, MGF or MS2 file, one at a time.

    Parameters
    ----------
    path : str or Path
        The spectrum file; its format is chosen by extension (case-insensitive).
    default_charges : tuple of int
        Charges to try for spectra whose file gives none.
    ms_levels : tuple of int
        Only spectra of these MS levels are yielded (MGF and MS2 hold MS2 only).

    Returns
    -------
    Iterator[Spectrum]
        ``mz`` float64 ascending, ``intensity`` float32, ``rt`` in seconds; a
        spectrum that cannot be scored has ``problem`` set.

    Raises
    ------
    InputError
        At once for an unknown extension or a missing or unreadable file; while
        iterating for a structurally corrupt file.
    """
    p = Path(path)
    if not (fmt := _suffix(p.name)):
        raise InputError(f"{p}: unknown spectrum file type (expected .mzML, .mzML.gz, .mgf, .ms2)")
    try:
        with open(p, "rb"):
            pass
    except OSError as exc:
        raise InputError(f"{p}: cannot read spectrum file: {exc.strerror or exc}") from None
    run, defaults = run_name(p), tuple(int(c) for c in default_charges)
    if fmt in (".mgf", ".ms2"):
        if 2 not in ms_levels:
            return iter(())
        return (_read_mgf if fmt == ".mgf" else _read_ms2)(p, run, defaults)
    return _read_mzml(p, run, defaults, frozenset(ms_levels), fmt == ".mzml.gz")


def count_spectra(path: str | Path) -> int | None:
    """Estimate the number of MS2 spectra in ``path`` by a quick byte scan.

    Parameters
    ----------
    path : str or Path
        A spectrum file.

    Returns
    -------
    int or None
        Counts ``BEGIN IONS`` (MGF), ``S`` lines (MS2) or ``<precursorList``
        tags (mzML); None when the file type is unknown or it cannot be read.
    """
    fmt = _suffix(Path(path).name)
    if not fmt:
        return None
    pattern, count, carry = _COUNT_PATTERN[fmt], 0, b"\n"
    try:
        with (gzip.open if fmt == ".mzml.gz" else open)(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                buf = carry + chunk
                count += buf.count(pattern)
                carry = buf[-(len(pattern) - 1):]
        return count
    except (OSError, EOFError, zlib.error):
        return None


def _one_line(exc: object) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _where(lineno: int | None, last: int | None) -> str:
    where = f" at line {lineno}" if lineno and lineno > 0 else ""
    return where + (f" after scan {last}" if last is not None else "")


def _float(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def _spectrum(run: str, scan: int, level: int, mz: Any, intensity: Any, precursor_mz: float,
              charges: Sequence[Any], rt: float, precursor_intensity: float,
              defaults: tuple[int, ...], problem: str = "") -> Spectrum:
    """Build a `Spectrum`, sorting peaks and recording why it cannot be scored."""
    mz = np.asarray(mz, dtype=np.float64)
    intensity = np.asarray(intensity, dtype=np.float32)
    problems = [problem] if problem else []
    if mz.shape != intensity.shape:
        problems.append(f"mismatched array lengths (m/z {mz.size}, intensity {intensity.size})")
        n = min(mz.size, intensity.size)
        mz, intensity = mz[:n], intensity[:n]
    if not problem:
        if mz.size == 0:
            problems.append("empty spectrum")
        elif not (np.isfinite(mz).all() and np.isfinite(intensity).all()):
            problems.append("non-finite peak values")
        elif (intensity < 0).any():
            problems.append("negative intensities")
    if mz.size > 1 and (np.diff(mz) < 0).any():
        order = np.argsort(mz, kind="stable")
        mz, intensity = mz[order], intensity[order]
    if not math.isfinite(precursor_mz):
        precursor_mz = 0.0
    if level >= 2 and precursor_mz <= 0 and "PEPMASS" not in problem:
        problems.append("missing precursor m/z")
    found: list[int] = []
    for c in charges:
        z = _float(c)
        if math.isfinite(z) and z != 0 and int(z) not in found:
            found.append(int(z))
    return Spectrum(run=run, scan=scan, ms_level=level, mz=mz, intensity=intensity,
                    precursor_mz=float(precursor_mz), charges=tuple(found) or defaults,
                    rt=rt if math.isfinite(rt) else 0.0,
                    precursor_intensity=precursor_intensity if math.isfinite(precursor_intensity)
                    else 0.0, problem="; ".join(problems))


# --- mzML ---------------------------------------------------------------------------------------

def _cv(elem: Any, groups: dict[str, _Params]) -> _Params:
    out: _Params = {}
    for child in elem:
        local = etree.QName(child).localname
        if local == "cvParam":
            unit = child.get("unitAccession") or child.get("unitName") or ""
            out[child.get("accession", "")] = (child.get("value", ""), unit)
        elif local == "referenceableParamGroupRef":
            for key, val in groups.get(child.get("ref", ""), {}).items():
                out.setdefault(key, val)
    return out


def _decode(bda: Any, params: _Params) -> tuple[np.ndarray, str]:
    if _NUMPRESS & params.keys():
        return np.empty(0), "unsupported numpress compression"
    dtype = next((d for acc, d in _DTYPES.items() if acc in params), None)
    if dtype is None:
        return np.empty(0), "unknown binary data type"
    try:
        raw = base64.b64decode((bda.findtext("{*}binary") or "").strip())
        if "MS:1000574" in params:
            raw = zlib.decompress(raw)
        return np.frombuffer(raw, dtype=dtype), ""
    except (binascii.Error, zlib.error, ValueError) as exc:
        return np.empty(0), f"undecodable peak array ({_one_line(exc)})"


def _mzml_spectrum(
    elem: Any, index: int, groups: dict[str, _Params], run: str, defaults: tuple[int, ...],
    levels: frozenset[int],
) -> tuple[int, Spectrum | None]:
    ident = elem.get("id", "")
    m = _SCAN_RE.search(ident)
    scan = int(m.group(1)) if m else index + 1
    params = _cv(elem, groups)
    precursor = elem.find("{*}precursorList/{*}precursor")
    level_f = _float(params.get("MS:1000511", ("",))[0])
    level = int(level_f) if math.isfinite(level_f) else (1 if precursor is None else 2)
    if level not in levels:
        return scan, None
    rt, scan_elem = 0.0, elem.find("{*}scanList/{*}scan")
    if scan_elem is not None and "MS:1000016" in (sp := _cv(scan_elem, groups)):
        value, unit = sp["MS:1000016"]
        rt = _float(value) * _TIME_FACTOR.get(unit, _TIME_FACTOR.get(unit.lower(), 60.0))
    precursor_mz, precursor_int, charges = math.nan, 0.0, []
    if precursor is not None:
        ion = precursor.find("{*}selectedIonList/{*}selectedIon")
        ip = _cv(ion, groups) if ion is not None else {}
        window = precursor.find("{*}isolationWindow")
        wp = _cv(window, groups) if window is not None else {}
        precursor_mz = _float(ip.get("MS:1000744", wp.get("MS:1000827", ("",)))[0])
        precursor_int = _float(ip.get("MS:1000042", ("0",))[0])
        if "MS:1000041" in ip:
            charges = [ip["MS:1000041"][0]]
        elif ion is not None:
            charges = [c.get("value") for c in ion.iterfind("{*}cvParam")
                       if c.get("accession") == "MS:1000633"]
    arrays: dict[str, np.ndarray] = {}
    problem = ""
    for bda in elem.iterfind("{*}binaryDataArrayList/{*}binaryDataArray"):
        bp = _cv(bda, groups)
        kind = "mz" if "MS:1000514" in bp else "intensity" if "MS:1000515" in bp else ""
        if kind:
            arrays[kind], err = _decode(bda, bp)
            problem = problem or err
    return scan, _spectrum(run, scan, level, arrays.get("mz", np.empty(0)),
                           arrays.get("intensity", np.empty(0)), precursor_mz, charges, rt,
                           precursor_int, defaults, problem)


def _read_mzml(path: Path, run: str, defaults: tuple[int, ...], levels: frozenset[int],
               gz: bool) -> Iterator[Spectrum]:
    groups: dict[str, _Params] = {}
    last: int | None = None
    index = 0
    tags = ("{*}referenceableParamGroup", "{*}spectrum", "{*}chromatogram")
    with (gzip.open if gz else open)(path, "rb") as fh:
        events = etree.iterparse(fh, events=("end",), tag=tags, huge_tree=True,
                                 remove_comments=True, resolve_entities=False)
        while True:
            try:
                _, elem = next(events)
            except StopIteration:
                return
            except (etree.Error, OSError, EOFError, zlib.error, ValueError) as exc:
                lineno = getattr(exc, "lineno", None) if isinstance(exc, etree.Error) else None
                raise InputError(f"{path}: corrupt mzML{_where(lineno, last)}: "
                                 f"{_one_line(exc)}") from None
            local = etree.QName(elem).localname
            if local == "referenceableParamGroup":
                groups[elem.get("id", "")] = _cv(elem, groups)
                continue
            spectrum = None
            if local == "spectrum":
                last, spectrum = _mzml_spectrum(elem, index, groups, run, defaults, levels)
                index += 1
            elem.clear()
            parent = elem.getparent()
            while parent is not None and elem.getprevious() is not None:
                del parent[0]
            if spectrum is not None:
                yield spectrum


# --- MGF and MS2 ---------------------------------------------------------------------------------

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


def _read_mgf(path: Path, run: str, defaults: tuple[int, ...]) -> Iterator[Spectrum]:
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
                reason = _one_line(getattr(exc, "message", exc))  # PyteomicsError.message
                raise InputError(f"{path}: corrupt MGF in entry {entry}"
                                 f"{_where(lines.lineno, last)}: {reason}") from None
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
            yield _spectrum(run, scan, 2, item["m/z array"], item["intensity array"],
                            _float(pepmass[0]), [c for c in charges if c is not None],
                            _float(params.get("rtinseconds", 0.0)),
                            _float(pepmass[1]) if pepmass[1] is not None else 0.0, defaults,
                            problem)
            last = scan


def _read_ms2(path: Path, run: str, defaults: tuple[int, ...]) -> Iterator[Spectrum]:
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
                        yield _ms2_spectrum(cur, run, defaults)
                        last = cur["scan"]
                    prec = _float(fields[3]) if len(fields) > 3 else math.nan
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
                raise InputError(f"{path}: corrupt MS2{_where(lineno, last)}: {_one_line(exc)} "
                                 f"in {line.strip()[:40]!r}") from None
    if cur is not None:
        yield _ms2_spectrum(cur, run, defaults)


def _ms2_spectrum(cur: dict[str, Any], run: str, defaults: tuple[int, ...]) -> Spectrum:
    peaks = np.array(cur["peaks"], dtype=np.float64).reshape(-1, 2)
    return _spectrum(run, cur["scan"], 2, peaks[:, 0], peaks[:, 1], cur["prec"], cur["z"],
                     cur["rt"], 0.0, defaults)
