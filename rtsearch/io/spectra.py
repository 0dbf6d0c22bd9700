"""Read spectra lazily from mzML, mzXML and MGF (plain or ``.gz``) and MS2 files.

Every reader is a generator that holds one spectrum at a time. A spectrum that
can be read but not scored is still yielded, with `Spectrum.problem` saying
why; a structurally corrupt file raises `InputError` (one line naming the file
and, where known, the line and the last scan read).

Formats: mzML and mzXML (`rtsearch.io.mzml`, `rtsearch.io.mzxml`, lxml), MGF (`rtsearch.io.mgf`, in bulk), MS2
(`rtsearch.io.ms2`, in bulk too), msalign (`rtsearch.io.msalign`: deconvoluted top-down spectra, given as
singly protonated ions, `rtsearch.types.DeconvolutedSpectrum.as_spectrum`); this module picks one by the file's
extension.
Every reader holds one block of the file at a time (MGF: `rtsearch.io.mgf.BLOCK_BYTES`).
"""

from __future__ import annotations

import gzip
import logging
import zlib
from collections.abc import Iterator
from pathlib import Path

from rtsearch.errors import InputError
from rtsearch.io.mgf import read_mgf
from rtsearch.io.ms2 import read_ms2
from rtsearch.io.msalign import read_msalign, run_of
from rtsearch.io.mzml import read_mzml
from rtsearch.io.mzxml import read_mzxml
from rtsearch.types import Spectrum

log = logging.getLogger(__name__)

_SUFFIXES = (".mzml.gz", ".mzml", ".mzxml.gz", ".mzxml", ".mgf.gz", ".mgf", ".ms2", ".msalign.gz", ".msalign")
_COUNT_PATTERN = {".mgf": b"BEGIN IONS", ".mgf.gz": b"BEGIN IONS", ".ms2": b"\nS", ".mzml": b"<precursorList",
                  ".mzml.gz": b"<precursorList", ".mzxml": b"<precursorMz", ".mzxml.gz": b"<precursorMz",
                  ".msalign": b"BEGIN IONS", ".msalign.gz": b"BEGIN IONS"}


def run_name(path: str | Path) -> str:
    """Return the file name of ``path`` without its spectrum-file extension.

    Parameters
    ----------
    path : str or Path
        A spectrum file, e.g. ``"data/BSA1.mzML.gz"``.

    Returns
    -------
    str
        The run name, e.g. ``"BSA1"`` (an msalign's without ``_ms2`` too, as its reader names it:
        `rtsearch.io.msalign.run_of`); the plain file name for other extensions.
    """
    name = Path(path).name
    if _suffix(name).startswith(".msalign"):
        return run_of(Path(path))
    return name[: len(name) - len(_suffix(name))] or name


def _suffix(name: str) -> str:
    return next((s for s in _SUFFIXES if name.lower().endswith(s)), "")


def read_spectra(
    path: str | Path,
    *,
    default_charges: tuple[int, ...] = (),
    ms_levels: tuple[int, ...] = (2,),
) -> Iterator[Spectrum]:
    """Iterate over the spectra of an mzML, mzXML or MGF (each plain or .gz) or MS2 file, one at a time.

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
        raise InputError(f"{p}: unknown spectrum file type (expected .mzML, .mzXML, .mgf, .msalign (each may be "
                         ".gz), .ms2)")  # fmt: skip
    try:
        with open(p, "rb"):
            pass
    except OSError as exc:
        raise InputError(f"{p}: cannot read spectrum file: {exc.strerror or exc}") from None
    run, defaults = run_name(p), tuple(int(c) for c in default_charges)
    return _guarded(p, fmt, _reader(p, fmt, run, defaults, ms_levels))


def _reader(p: Path, fmt: str, run: str, defaults: tuple[int, ...], ms_levels: tuple[int, ...]) -> Iterator[Spectrum]:
    if fmt in (".msalign", ".msalign.gz"):
        return (d.as_spectrum() for d in read_msalign(p, ms_levels=ms_levels))
    if fmt in (".mgf", ".mgf.gz", ".ms2"):
        if 2 not in ms_levels:
            return iter(())
        if fmt == ".ms2":
            return read_ms2(p, run, defaults)
        return read_mgf(p, run, defaults, gz=fmt == ".mgf.gz")
    if fmt.startswith(".mzxml"):
        return read_mzxml(p, run, defaults, frozenset(ms_levels), fmt.endswith(".gz"))
    return read_mzml(p, run, defaults, frozenset(ms_levels), fmt == ".mzml.gz")


def _guarded(p: Path, fmt: str, spectra: Iterator[Spectrum]) -> Iterator[Spectrum]:
    """``spectra`` with a file cut short or not compressed as named raised as one `InputError` naming the file,
    and a warning when it held no spectrum at all (an empty file, or one of another format than its name says)."""
    n = 0
    try:
        for n, sp in enumerate(spectra, 1):  # noqa: B007 (n counts what was read)
            yield sp
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        after = f" after {n:,} spectra" if n else ""
        raise InputError(f"{p}: truncated or corrupt compressed file{after} ({e})") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: not a text {fmt} file ({e.reason} at byte {e.start:,})") from None
    if n == 0 and (why := _why_empty(p, fmt)):
        log.warning("%s: no spectrum read (%s)", p, why)


def _why_empty(p: Path, fmt: str) -> str:
    """Why a file of format ``fmt`` (its extension) gave no spectrum where its first bytes tell ("": they do not —
    it may hold none of the MS levels asked for)."""
    try:
        with (gzip.open(p, "rb") if fmt.endswith(".gz") else open(p, "rb")) as fh:
            head = fh.read(4096).lstrip()
    except (OSError, EOFError, zlib.error):
        return ""
    if not head:
        return "the file is empty"
    xml = head.startswith(b"<")
    if fmt.startswith((".mgf", ".ms2", ".msalign")) and xml:
        return f"it is XML, not {fmt}: an mzML or mzXML file named {p.name}?"
    if fmt.startswith((".mzml", ".mzxml")) and not xml:
        return f"it is not XML: not an {fmt} file"
    return ""


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
        with (gzip.open if fmt.endswith(".gz") else open)(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                buf = carry + chunk
                count += buf.count(pattern)
                carry = buf[-(len(pattern) - 1):]
        return count
    except (OSError, EOFError, zlib.error):
        return None
