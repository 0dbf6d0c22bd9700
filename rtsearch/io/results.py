"""Result files: the PSM table written as TSV or Parquet, atomically.

Columns are the table's ``column_names`` (`rtsearch.search.table.result_columns`:
the same first columns for every kind of search, then the kind's own); empty cells
(nulls) for spectra without a match. A run's file in the daemon's results folder is
`results_path`: the run's name made safe for a file name. Written column-wise through Arrow (C++, without the
GIL for the formatting), so a daemon finishing a run does not stall its scoring thread; a TSV's rows are formatted
in parts on threads side by side (`TSV_PART_ROWS`). The file is written to a temporary name in the same folder
and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from rtsearch.errors import InputError
from rtsearch.io import provenance as prov
from rtsearch.io.arrow import bool_array, float_array, int_array, string_array
from rtsearch.io.perms import as_umask


class Table(Protocol):
    """A finalized table (`rtsearch.search.table.PsmTable`): its column names and column values."""

    column_names: tuple[str, ...]

    def columns(self) -> dict[str, Any]: ...


_STRINGS = frozenset({"run", "spectrum_id", "peptide", "proteins", "reason"})
_TSV_SAFE = bytes.maketrans(b'\t\n\r"', b"   '")
# rows a thread formats at least, on at most TSV_THREADS: Arrow's CSV writer is one thread a call (it leaves the GIL),
# and formatting the numbers was most of writing 50,000 rows (on an H100 host's 16 cores, 0.27-0.38 s in one part,
# 0.14-0.15 s in parts: docs/history/RESULTS.md, 2026-11-28 01:20); a daemon writing a run's file takes a few cores
# briefly
TSV_PART_ROWS = 4096
TSV_THREADS = 8


def _array(name: str, values: Any) -> pa.Array:
    if name in _STRINGS:
        # TSV without quoting: no tabs, line breaks or quotes inside a cell (run names come from the wire); replaced
        # over the column's encoded bytes at once (a Python `str.translate` per cell was half of writing 50,000 rows;
        # Arrow's regex replace 7-20 ms a column of 50,000, this 1-2 ms)
        return string_array(values, translate=_TSV_SAFE)
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        return float_array(arr)
    if arr.dtype.kind == "b":
        return bool_array(arr)
    return int_array(arr)


def write_table(table: Table, path: str | Path, *, provenance: dict[str, Any] | None = None) -> int:
    """Write a finalized table to ``path`` (``.tsv`` or ``.parquet``); returns the row count. ``provenance``
    (`rtsearch.io.provenance.record`): beside it as ``<path>.provenance.json`` and, in Parquet, in the file's
    metadata."""
    meta = {"rtsearch.provenance": json.dumps(provenance, default=str)} if provenance else None
    n = write_columns(table.columns(), table.column_names, path, metadata=meta)
    if provenance:
        prov.write_json(provenance, prov.sidecar(path))
    return n


def write_columns(cols: dict[str, Any], names: tuple[str, ...], path: str | Path, *,
                  metadata: dict[str, str] | None = None) -> int:  # fmt: skip
    """Write columns ``names`` of ``cols`` (one value per row each) to ``path``, atomically; the row count.
    ``metadata``: key-value pairs a Parquet file keeps in its schema (`rtsearch.io.provenance`)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".tsv", ".parquet", ".txt"):
        raise InputError(f"{p}: output must end in .tsv or .parquet")
    arrow = pa.table({c: _array(c, cols[c]) for c in names})
    if metadata:
        arrow = arrow.replace_schema_metadata(metadata)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    os.close(fd)
    as_umask(tmp)  # mkstemp's 0600 would keep the lab's analysts out
    try:
        if suffix == ".parquet":
            pq.write_table(arrow, tmp)
        else:
            with open(tmp, "wb") as fh:  # Arrow would quote the header's names
                fh.write(("\t".join(names) + "\n").encode())
                for part in _tsv_parts(arrow):
                    fh.write(part)
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return arrow.num_rows


def _tsv_parts(arrow: pa.Table) -> Iterator[pa.Buffer]:
    """``arrow``'s rows as TSV (no header, no quoting), in order, in parts formatted on threads side by side."""
    opts = pacsv.WriteOptions(delimiter="\t", quoting_style="none", include_header=False)
    n = arrow.num_rows
    parts = max(1, min(os.cpu_count() or 1, TSV_THREADS, n // TSV_PART_ROWS))
    step = -(-n // parts) if n else 0

    def formatted(start: int) -> pa.Buffer:
        sink = pa.BufferOutputStream()
        pacsv.write_csv(arrow.slice(start, step), sink, write_options=opts)
        return sink.getvalue()

    if parts == 1:
        yield formatted(0)
        return
    with ThreadPoolExecutor(parts, thread_name_prefix="tsv") as pool:
        yield from pool.map(formatted, range(0, n, step))


_FILE_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_STEM = 100  # characters of a run's name kept in its file's name (file systems allow 255 bytes)


def read_results(path: str | Path, columns: tuple[str, ...] | None) -> dict[str, list[Any]]:
    """``columns`` (None: all, in file order) of a results file written here (TSV or Parquet, by its suffix), as
    lists (None where empty); `InputError` naming what is wrong when the file cannot be read or lacks a column."""
    p = Path(path)
    try:
        if p.suffix.lower() == ".parquet":
            table = pq.read_table(p)
        else:
            table = pacsv.read_csv(p, parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
                                   convert_options=pacsv.ConvertOptions(strings_can_be_null=True))  # fmt: skip
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"{p}: not a readable rtsearch results file (.tsv or .parquet): {e}") from None
    columns = tuple(table.column_names) if columns is None else columns
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise InputError(f"{p}: not a readable rtsearch results file (no column {', '.join(missing)})")
    return {c: table.column(c).to_pylist() for c in columns}


def results_path(folder: str | Path, run: str, fmt: str = "tsv", part: int = 1) -> Path:
    """The results file of ``run`` inside ``folder``: the run name made file-safe, never shared.

    A name that had to change (``a/b``, ``a b``, ``.``, longer than `MAX_STEM`) also gets a hash of
    the original, so two runs never share a file. ``part`` > 1 names a later file of the same run
    (`claim_results_path`).
    """
    stem = _FILE_UNSAFE.sub("_", run)
    if stem != run or stem.strip(".") == "" or len(stem) > MAX_STEM:
        stem = f"{stem[:MAX_STEM]}-{hashlib.sha256(run.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"
    return Path(folder) / (f"{stem}.{fmt}" if part <= 1 else f"{stem}.part{part}.{fmt}")


def claim_results_path(folder: str | Path, run: str, fmt: str, claimed: set[Path]) -> Path:
    """The first results file of ``run`` that neither exists (an earlier daemon's) nor is ``claimed``; claimed now."""
    part = 1
    while (path := results_path(folder, run, fmt, part)) in claimed or path.exists():
        part += 1
    claimed.add(path)
    return path


def check_writable(folder: str | Path) -> None:
    """Create ``folder`` if needed and write a file in it; `InputError` naming why when that fails."""
    p = Path(folder)
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=p)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise InputError(f"results folder {p} is not writable: {e.strerror or e}") from None


def write_run_results(table: Table, path: str | Path, provenance: dict[str, Any] | None = None) -> Path:
    """Write a finalized run's table to ``path`` atomically (`write_table`); returns the path (blocking: call in a
    thread)."""
    write_table(table, path, provenance=provenance)
    return Path(path)
