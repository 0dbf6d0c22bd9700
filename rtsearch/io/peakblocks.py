"""What the bulk peak-list readers (`rtsearch.io.mgf`, `rtsearch.io.ms2`) share: a file in blocks of whole
entries, every peak line of a block parsed by one Arrow CSV call, and the per-spectrum checks over the block.

Arrow's CSV reader parses numbers in C, several hundred MB/s; a line-by-line reader in Python manages
20–45 MB/s (docs/history/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from rtsearch.io.arrow import floats

BLOCK_BYTES = 1 << 24  # read this much at a time (a block holds whole entries: it is cut after the last one)
_TAB_TO_SPACE = bytes.maketrans(b"\t", b" ")
_CSV_READ = pacsv.ReadOptions(autogenerate_column_names=True, block_size=1 << 22)
_CSV_CONVERT = pacsv.ConvertOptions(column_types={"f0": pa.float64(), "f1": pa.float64()})


def blocks(read: Callable[[int], bytes], cut: Callable[[bytes], int], size: int | None = None) -> Iterator[bytes]:
    """A file (its ``read``) in blocks of about ``size`` (`BLOCK_BYTES`), each ending where ``cut(buffer)`` says
    its last whole entry ends (-1: none yet, read on); the last block is the rest, ending in a newline."""
    carry = b""
    while data := read(size or BLOCK_BYTES):
        buf = carry + data if carry else data
        end = cut(buf)
        if end < 0:
            carry = buf
            continue
        yield buf[:end]
        carry = buf[end:]
    if carry:
        yield carry if carry.endswith(b"\n") else carry + b"\n"


def parse_regions(
    block: bytes, regions: list[tuple[int, int]], rows: int, *, reject: tuple[bytes, ...] = ()
) -> tuple[np.ndarray, np.ndarray] | None:
    """The peak lines of ``regions`` of ``block`` (``rows`` lines in all), m/z float64 and intensity float32, in
    one Arrow parse; ``None`` when they are not plain two-column lines (a blank line, a third column, a number
    that does not parse, one of ``reject``): the caller reads them line by line."""
    view = memoryview(block)
    text = b"".join([view[a:b] for a, b in regions])
    if b"\n\n" in text or text.startswith(b"\n") or any(r in text for r in reject):
        return None
    tab, space = b"\t" in text, b" " in text
    if tab and space:
        text = text.translate(_TAB_TO_SPACE)
    if not text:
        return (np.zeros(0), np.zeros(0, np.float32)) if rows == 0 else None
    try:
        parse = pacsv.ParseOptions(delimiter="\t" if tab and not space else " ")
        table = pacsv.read_csv(pa.py_buffer(text), read_options=_CSV_READ, parse_options=parse,
                               convert_options=_CSV_CONVERT)  # fmt: skip
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if table.num_columns != 2 or table.num_rows != rows:
        return None
    mz, intensity = (floats(table.column(k)) for k in (0, 1))
    return mz, intensity.astype(np.float32)


def clean(mz: np.ndarray, intensity: np.ndarray, bounds: np.ndarray) -> list[bool]:
    """Per entry (peaks ``bounds[k]:bounds[k+1]``): whether its peaks are non-empty, finite, non-negative and
    sorted (else `rtsearch.io.parsing.make_spectrum` looks at them itself, to say what is wrong or to sort)."""
    flags = ~np.isfinite(mz) | ~np.isfinite(intensity) | (intensity < 0)
    flags[1:] |= mz[1:] < mz[:-1]
    starts = bounds[:-1][bounds[:-1] < len(mz)]
    flags[starts] = ~np.isfinite(mz[starts]) | ~np.isfinite(intensity[starts]) | (intensity[starts] < 0)
    before = np.zeros(len(mz) + 1, dtype=np.int64)
    np.cumsum(flags, out=before[1:])
    flagged = before[bounds[1:]] - before[bounds[:-1]]
    return ((flagged == 0) & (bounds[1:] > bounds[:-1])).tolist()


def bounds_of(counts: list[int]) -> np.ndarray:
    """Where each entry's peaks start in a block's columns, and the end (``len(counts) + 1`` offsets)."""
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out
