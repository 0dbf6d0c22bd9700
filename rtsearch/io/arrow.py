"""NumPy and Python values to Arrow arrays and back, straight through their buffers.

Not ``pyarrow.array`` nor ``to_numpy``: both import pandas where it is installed, to check whether what they are
given is a pandas object — 0.38 s in a process on the GPU machine, paid by every MGF reader process on its first
part and by ``rtsearch search`` when it wrote its results (docs/history/RESULTS.md, 2026-11-28 14:48–15:31). Arrow's own
constructors over buffers (``Array.from_buffers``) do not.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SEPARATOR = 0  # a byte no string holds (checked): joins a column's strings for one encode


def floats(column: pa.ChunkedArray) -> np.ndarray:
    """A float64 column as a NumPy array (NaN where null)."""
    parts = []
    for chunk in column.chunks:
        if chunk.null_count:
            chunk = pc.fill_null(chunk, np.nan)
        parts.append(np.frombuffer(chunk.buffers()[1], np.float64, len(chunk), chunk.offset * 8))
    return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0)


def float_array(values: np.ndarray) -> pa.Array:
    """float64, null where NaN."""
    v = np.ascontiguousarray(values, np.float64)
    missing = np.isnan(v)
    nulls = int(missing.sum())
    valid = pa.py_buffer(np.packbits(~missing, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.float64(), len(v), [valid, pa.py_buffer(v)], null_count=nulls)


def int_array(values: np.ndarray) -> pa.Array:
    """int64, no nulls."""
    v = np.ascontiguousarray(values, np.int64)
    return pa.Array.from_buffers(pa.int64(), len(v), [None, pa.py_buffer(v)], null_count=0)


def bool_array(values: np.ndarray) -> pa.Array:
    """bool, no nulls."""
    v = np.asarray(values, bool)
    return pa.Array.from_buffers(pa.bool_(), len(v), [None, pa.py_buffer(np.packbits(v, bitorder="little"))],
                                 null_count=0)  # fmt: skip


def string_array(values: Sequence[str | None], *, translate: bytes | None = None) -> pa.Array:
    """UTF-8 strings (``None``: null): encoded as one joined string, cut where the separators were. ``translate``:
    a `bytes.maketrans` table applied to the encoded bytes, mapping ASCII bytes to ASCII bytes other than NUL only
    (UTF-8's multi-byte sequences hold no ASCII byte, so each character stays whole)."""
    n = len(values)
    missing = [v is None for v in values] if None in values else None
    text: Sequence[str] = [("" if v is None else v) for v in values] if missing else values  # type: ignore[assignment]
    joined = "\x00".join(text).encode("utf-8", "surrogatepass")
    raw = np.frombuffer(joined.translate(translate) if translate else joined, np.uint8)
    cuts = np.flatnonzero(raw == _SEPARATOR)
    if len(cuts) != n - 1:  # a string holds the separator itself: each encoded on its own
        encoded = [t.encode("utf-8", "surrogatepass") for t in text]
        encoded = [b.translate(translate) for b in encoded] if translate else encoded
        lengths = np.fromiter((len(b) for b in encoded), np.int64, n)
        data = b"".join(encoded)
    else:
        lengths = np.diff(np.r_[-1, cuts, len(raw)]) - 1
        data = raw[raw != _SEPARATOR].tobytes()
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    kind, width = (pa.string(), np.int32) if offsets[-1] < 2**31 else (pa.large_string(), np.int64)
    valid = pa.py_buffer(np.packbits(~np.array(missing), bitorder="little")) if missing else None
    return pa.Array.from_buffers(kind, n, [valid, pa.py_buffer(offsets.astype(width)), pa.py_buffer(data)],
                                 null_count=sum(missing) if missing else 0)  # fmt: skip
