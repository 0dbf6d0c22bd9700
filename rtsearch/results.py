"""Result files: the PSM table written as TSV or Parquet, atomically.

Columns are `rtsearch.psms.COLUMNS` (names exact); empty cells for spectra
without a match. The file is written to a temporary name in the same folder
and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rtsearch.errors import InputError
from rtsearch.psms import COLUMNS

_INT_COLUMNS = frozenset({"scan", "charge", "matched_peaks"})


def _cell(name: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if name in _INT_COLUMNS:
            return str(int(value))
        return f"{value:.6g}" if name in ("q_value", "peptide_q_value") else f"{value:.6f}".rstrip("0").rstrip(".")
    return str(value).replace("\t", " ").replace("\n", " ")


def write_results(rows: Iterable[dict[str, Any]], path: str | Path) -> int:
    """Write rows to ``path`` (``.tsv`` or ``.parquet``); returns the row count."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".tsv", ".parquet", ".txt"):
        raise InputError(f"{p}: output must end in .tsv or .parquet")
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    n = 0
    try:
        if suffix == ".parquet":
            os.close(fd)
            n = _write_parquet(rows, tmp)
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write("\t".join(COLUMNS) + "\n")
                for row in rows:
                    fh.write("\t".join(_cell(c, row.get(c)) for c in COLUMNS) + "\n")
                    n += 1
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return n


def _write_parquet(rows: Iterable[dict[str, Any]], path: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for row in rows:
        for c in COLUMNS:
            data[c].append(row.get(c))
    types = {c: pa.string() for c in ("run", "peptide", "proteins", "reason")}
    types.update({c: pa.int64() for c in _INT_COLUMNS})
    types["is_decoy"] = pa.bool_()
    table = pa.table({c: pa.array(v, type=types.get(c, pa.float64())) for c, v in data.items()})
    pq.write_table(table, path)
    return table.num_rows
