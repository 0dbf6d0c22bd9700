"""A large plain MGF or mzML file cut into byte ranges of whole entries, each readable on its own (in a worker
process: `rtsearch.io.batches`).

    file   | head (MGF: parameters; mzML: cvList, paramGroups, …) | entry | entry | … | entry | tail |
    parts              [ part 0 ......... )[ part 1 ........ )[ … part n-1 ........ )
                       cut just after an entry's end (MGF: the ``END IONS`` line; mzML: ``</spectrum>``)

A part is read with what precedes it that matters: the MGF header's parameters, the mzML
``referenceableParamGroupList``, and the number of entries before it (entries without a scan number are
numbered by their place in the file). The entries of each part are counted by the caller's ``map`` (the worker
pool's: the byte scans then run in parallel, off the GIL of the process that opens the target).
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtsearch.io.mgf import read_mgf_part
from rtsearch.io.mzml import read_mzml_part
from rtsearch.io.spectra import run_name
from rtsearch.types import Spectrum

Range = tuple[int, int]


@dataclass(frozen=True)
class Layout:
    """Where a format's entries begin and end."""

    begin: re.Pattern[bytes]  # an entry's first bytes
    end: bytes  # an entry's last bytes
    to_line_end: bool  # a part is cut after the line holding ``end`` (MGF), else right after it (mzML)
    from_head: bool  # the first part starts at the first entry (mzML), else at the file's start (MGF)
    tail: re.Pattern[bytes] | None = None  # what must follow the last entry (else the file is read whole)


LAYOUTS = {
    ".mgf": Layout(re.compile(rb"BEGIN IONS"), b"\nEND IONS", True, False),
    ".mzml": Layout(re.compile(rb"<spectrum[\s>]"), b"</spectrum>", False, True,
                    re.compile(rb"\s*</(\w+:)?spectrumList\s*>.*</(\w+:)?(indexedmzML|mzML)\s*>\s*$", re.S)),
}


@dataclass(frozen=True)
class Plan:
    """The parts of one file, the entries before each, and where its first entry begins."""

    path: Path
    fmt: str
    parts: list[Range]
    before: list[int]
    head: int


def layout_of(path: Path) -> str:
    """``.mgf``, ``.mzml`` or ``""`` (a file read whole in one process: another format, or gzipped)."""
    name = path.name.lower()
    return next((s for s in LAYOUTS if name.endswith(s)), "")


def plan(path: Path, n: int, count: Callable[..., list[int]]) -> Plan | None:
    """About ``n`` parts of ``path``; ``count`` maps `entries` over them (``count(entries, paths, fmts, parts)``).
    ``None`` when the file does not end as its format says (cut short: read it whole, to raise its error)."""
    fmt = layout_of(path)
    lay = LAYOUTS[fmt]
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        size = len(data)
        first = lay.begin.search(data)
        head = first.start() if first else 0
        last = data.rfind(lay.end) if lay.from_head else -1
        stop = last + len(lay.end) if last >= 0 else size
        if lay.tail is not None and not lay.tail.match(data[stop:]):
            return None
        cuts = [head if lay.from_head else 0]
        for k in range(1, n):
            end = data.find(lay.end, max(head + (stop - head) * k // n, cuts[-1]), stop)
            cut = (data.find(b"\n", end + 1) + 1 if lay.to_line_end else end + len(lay.end)) if end >= 0 else 0
            if cut <= cuts[-1] or cut >= stop:
                break
            cuts.append(cut)
        cuts.append(stop)
    parts = [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]
    counts = count(entries, [path] * (len(parts) - 1), [fmt] * (len(parts) - 1), parts[:-1])
    before = [0]
    for c in counts:
        before.append(before[-1] + c)
    return Plan(path, fmt, parts, before, head)


def entries(path: Path, fmt: str, part: Range) -> int:
    """The entries that begin in bytes ``part`` of ``path``."""
    with open(path, "rb") as fh:
        fh.seek(part[0])
        data = fh.read(part[1] - part[0])
    pattern = LAYOUTS[fmt].begin
    return data.count(pattern.pattern) if fmt == ".mgf" else sum(1 for _ in pattern.finditer(data))


def read_part(p: Plan, k: int, *, ms_levels: frozenset[int] = frozenset({2})) -> Iterator[Spectrum]:
    """The spectra of part ``k`` as the whole file's reader gives them there (`InputError`: read the file whole
    to name the line)."""
    reader: Any = read_mgf_part if p.fmt == ".mgf" else read_mzml_part
    args = () if p.fmt == ".mgf" else (ms_levels,)
    return reader(p.path, run_name(p.path), (), *args, p.parts[k], p.head, p.before[k])
