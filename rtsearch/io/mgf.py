"""MGF (plain or gzipped) read in bulk: blocks of the file at a time, every peak of a block parsed at once.

Why not `pyteomics.mgf` (which this replaced): it reads line by line in Python. On the 50,000-spectrum
bench MGF (241 MB) it took 5.3–5.5 s on the development machine against 1.3–1.4 s here, and 7.92 against
2.19 s on the GPU machine, where it had been 34 of the 40 s of a profiled `rtsearch search` (issue 17);
`bench/readers.py` measures both, docs/history/RESULTS.md records them. Here a block of `BLOCK_BYTES`
(cut after its last ``END IONS``) is scanned for its entries with `bytes.find` (one Python step per
spectrum, none per peak), the peak lines of all its entries are joined and parsed by Arrow's CSV reader
in one call (in a thread, while the previous block's spectra are built), and the checks
`rtsearch.io.parsing.make_spectrum` makes per spectrum (empty, non-finite, negative, unsorted) are made
over the whole block's arrays. A block with an entry the fast path cannot take (a third column, a blank
line among its peaks, a parameter line after its first peak, a number that does not parse) is read entry
by entry, line by line, which is also what finds the line of an error.

What the file says is read as pyteomics read it: parameters before the first entry apply to every entry
(``use_header``), keys are case-insensitive, ``PEPMASS`` is m/z and an optional intensity, ``CHARGE``
takes forms like ``2+``, ``2+ and 3+``, ``2+,3+``, the scan number comes from ``SCANS`` or a
``scan=N`` in the ``TITLE``, else the entry's number.
"""

from __future__ import annotations

import gzip
import io
import math
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rtsearch.errors import InputError
from rtsearch.io.parsing import make_spectrum, one_line, to_float, where
from rtsearch.io.peakblocks import blocks, bounds_of, clean, parse_regions
from rtsearch.types import Spectrum

BLOCK_BYTES = 1 << 24  # read this much at a time (tests make it small to cut entries across blocks)
_BEGIN, _END = b"BEGIN IONS", b"END IONS"
_FIRST_PEAK = re.compile(rb"\n(?=[0-9])")  # a peak line starts with a digit
_PARAM = re.compile(rb"^[ \t]*([^=\n#;!/ \t][^=\n]*?)[ \t]*=[ \t]*([^\n]*?)[ \t\r]*$", re.M)  # KEY=value
_TITLE_SCAN = re.compile(r"scan=(\d+)", re.I)
_DIGITS = re.compile(r"\d+")
_CHARGE = re.compile(r"(\d+)\s*([+-]?)")
_COMMENT = (b"#", b";", b"!", b"/")


class _Corrupt(Exception):
    """An entry the file cannot give: its number, the reason, and the offset in the block of the line at fault."""

    def __init__(self, entry: int, reason: str, offset: int) -> None:
        super().__init__(reason)
        self.entry, self.reason, self.offset = entry, reason, offset


@dataclass
class _Entry:
    number: int  # 1-based, in the file
    params: dict[str, str]
    peaks: tuple[int, int]  # offsets in the block of its peak lines (start, end)
    lines: int  # its peak lines; -1: lines other than parameters before its first peak (read line by line)


@dataclass
class _Block:
    """A block of whole entries (but in the last block) and what a scan of it found."""

    data: bytes
    entries: list[_Entry]
    lines_before: int  # lines of the file before it
    error: _Corrupt | None  # the last block ends inside an entry


def read_mgf(path: Path, run: str, defaults: tuple[int, ...], *, gz: bool = False) -> Iterator[Spectrum]:
    """The spectra of an MGF file in file order (see the module docstring); `InputError` names the entry and line
    of what is corrupt, after the spectra before it were given.

    A block's peaks are parsed in a thread (Arrow releases the GIL) while this one builds the previous
    block's spectra."""
    with gzip.open(path, "rb") if gz else open(path, "rb") as fh:
        yield from _read(_Reader(path, run, defaults), fh.read)


def read_mgf_part(path: Path, run: str, defaults: tuple[int, ...], part: tuple[int, int], head: int,
                  entries_before: int) -> Iterator[Spectrum]:  # fmt: skip
    """The spectra of bytes ``part`` = [start, stop) of a plain MGF file, cut after an ``END IONS`` line, as
    `read_mgf` gives them there: the file's parameters before its first entry (``head`` bytes) apply, and
    entries are numbered after the ``entries_before`` of the file before ``start`` (`rtsearch.io.parallel`).
    An error's line is counted from ``start``: read the file whole to name it."""
    start, stop = part
    with open(path, "rb") as fh:
        header = fh.read(head) if start > 0 else b""
        fh.seek(start)
        data = fh.read(stop - start)
    reader = _Reader(path, run, defaults)
    reader.entries = entries_before
    if start > 0:
        reader.header = _params(header, 0, len(header))[0]
    yield from _read(reader, io.BytesIO(data).read)


def _read(reader: _Reader, read: Callable[[int], bytes]) -> Iterator[Spectrum]:
    """The spectra of what ``read`` gives, block by block; a block's peaks parsed in a thread while the previous
    block's spectra are built."""
    with ThreadPoolExecutor(1, "mgf") as parser:
        ahead: tuple[_Block, Future[tuple[np.ndarray, np.ndarray] | None]] | None = None
        for data in blocks(read, _cut, BLOCK_BYTES):
            block = reader.scan(data)
            parsed = parser.submit(_parse_all, data, block.entries)
            if ahead is not None:
                yield from reader.spectra(*ahead)
            ahead = (block, parsed)
        if ahead is not None:
            yield from reader.spectra(*ahead)


def _cut(buf: bytes) -> int:
    """Where the last whole entry of ``buf`` ends (after its ``END IONS`` line; -1: none yet)."""
    end = buf.rfind(_END)
    line_end = -1 if end < 0 else buf.find(b"\n", end)
    return -1 if line_end < 0 else line_end + 1


class _Reader:
    """The state across blocks: entries so far, lines so far, the file's header, the last scan given."""

    def __init__(self, path: Path, run: str, defaults: tuple[int, ...]) -> None:
        self.path, self.run, self.defaults = path, run, defaults
        self.entries = 0
        self.lines = 0  # lines of the blocks scanned
        self.header: dict[str, str] | None = None  # the file's parameters before its first entry
        self.last: int | None = None

    def scan(self, data: bytes) -> _Block:
        """Find the entries of a block, their parameters and where their peaks are (one Python step an entry)."""
        block = _Block(data, [], self.lines, None)
        self.lines += data.count(b"\n")
        pos = 0
        while True:
            start = data.find(_BEGIN, pos)
            if self.header is None:
                self.header = _params(data, 0, len(data) if start < 0 else start)[0]
            if start < 0:
                return block
            self.entries += 1
            stop = data.find(_END, start)
            if stop < 0:  # only the last block can end inside an entry
                block.error = _Corrupt(self.entries, "file ends inside an entry (truncated?)", len(data))
                return block
            body = (data.find(b"\n", start, stop) + 1) or stop
            first = _FIRST_PEAK.search(data, body - 1, stop)
            peaks = first.end() if first else stop
            params, plain = _params(data, body, peaks)
            if plain:
                block.entries.append(_Entry(self.entries, params, (peaks, stop), data.count(b"\n", peaks, stop)))
            else:
                block.entries.append(_Entry(self.entries, params, (body, stop), -1))
            pos = stop + len(_END)

    def spectra(self, block: _Block, parsed: Future[tuple[np.ndarray, np.ndarray] | None]) -> Iterator[Spectrum]:
        """The spectra of a scanned block, its peaks ``parsed`` (`_parse_all`); `InputError` after those before a
        corrupt entry."""
        error = block.error
        try:
            yield from self._spectra(block.data, block.entries, parsed.result())
        except _Corrupt as exc:
            error = exc
        if error is not None:
            line = block.lines_before + block.data.count(b"\n", 0, error.offset) + 1
            raise InputError(f"{self.path}: corrupt MGF in entry {error.entry}{where(line, self.last)}: "
                             f"{error.reason}")  # fmt: skip

    def _spectra(
        self, data: bytes, entries: list[_Entry], columns: tuple[np.ndarray, np.ndarray] | None
    ) -> Iterator[Spectrum]:
        """The spectra of ``entries``: off the block's ``columns`` when every entry was plain, else entry by entry."""
        if columns is None:
            for entry in entries:
                mz, intensity, params = _parse_lines(data, entry)
                entry.params.update(params)
                yield self._spectrum(entry, mz, intensity, checked=False)
            return
        mz, intensity = columns
        bounds = bounds_of([e.lines for e in entries])
        checked = clean(mz, intensity, bounds)
        for k, entry in enumerate(entries):
            a, b = int(bounds[k]), int(bounds[k + 1])
            yield self._spectrum(entry, mz[a:b], intensity[a:b], checked=checked[k])

    def _spectrum(self, entry: _Entry, mz: np.ndarray, intensity: np.ndarray, *, checked: bool) -> Spectrum:
        """``checked``: the block's checks found the peaks non-empty, finite, non-negative and sorted."""
        params = {**self.header, **entry.params} if self.header else entry.params
        title = params.get("title", "")
        m = _DIGITS.search(params.get("scans", "")) or _TITLE_SCAN.search(title)
        scan = int(m.group(m.re.groups)) if m else entry.number
        problem = ""
        pepmass = params.get("pepmass", "").split()
        if not pepmass:
            problem = f"MGF entry {entry.number} has no PEPMASS" + (f" (TITLE={title})" if title else "")
        precursor = to_float(pepmass[0]) if pepmass else math.nan
        precursor_intensity = to_float(pepmass[1]) if len(pepmass) > 1 else 0.0
        charges = [int(z) * (-1 if sign == "-" else 1) for z, sign in _CHARGE.findall(params.get("charge", ""))]
        self.last = scan
        return make_spectrum(self.run, scan, 2, mz, intensity, precursor, charges,
                             to_float(params.get("rtinseconds", 0.0)), precursor_intensity, self.defaults, problem,
                             checked=checked and not problem, native_id=title)  # fmt: skip


def _params(block: bytes, start: int, stop: int) -> tuple[dict[str, str], bool]:
    """``KEY=value`` lines of ``block[start:stop]``, keys lower-cased, and whether every other line there is blank
    or a comment."""
    pairs = _PARAM.findall(block, start, stop)
    if len(pairs) == block.count(b"\n", start, stop):  # every line a parameter (most files): one regex pass
        return {k.decode("utf-8", "replace").lower(): v.decode("utf-8", "replace") for k, v in pairs}, True
    out: dict[str, str] = {}
    plain = True
    for raw in block[start:stop].split(b"\n"):
        line = raw.strip()
        if not line or line.startswith(_COMMENT):
            continue
        if b"=" not in line:
            plain = False
            continue
        key, _, value = line.partition(b"=")
        out[key.decode("utf-8", "replace").strip().lower()] = value.decode("utf-8", "replace").strip()
    return out, plain


def _parse_all(block: bytes, entries: list[_Entry]) -> tuple[np.ndarray, np.ndarray] | None:
    """Every entry's peaks in one parse (`rtsearch.io.peakblocks.parse_regions`), or ``None`` when some entry is
    not plain two-column lines (a parameter line among its peaks included)."""
    if not entries or min(e.lines for e in entries) < 0:
        return None
    return parse_regions(block, [e.peaks for e in entries], sum(e.lines for e in entries), reject=(b"=",))


def _parse_lines(block: bytes, entry: _Entry) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    """One entry's peak lines read line by line (``m/z intensity [anything]``), and parameter lines among them."""
    mz: list[float] = []
    intensity: list[float] = []
    params: dict[str, str] = {}
    start, stop = entry.peaks
    offset = start
    for raw in block[start:stop].split(b"\n"):
        line = raw.strip()
        here, offset = offset, offset + len(raw) + 1
        if not line or line.startswith(_COMMENT):
            continue
        if b"=" in line:
            params.update(_params(line, 0, len(line))[0])
            continue
        fields = line.split()
        try:
            if len(fields) < 2:
                raise ValueError(f"expected 'm/z intensity', got {line[:40].decode('utf-8', 'replace')!r}")
            mz.append(float(fields[0]))
            intensity.append(float(fields[1]))
        except ValueError as exc:
            raise _Corrupt(entry.number, one_line(exc), here) from None
    return np.array(mz, dtype=np.float64), np.array(intensity, dtype=np.float32), params
