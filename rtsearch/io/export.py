"""rtsearch results in the field's interchange formats: psm_utils TSV, Percolator PIN, mzIdentML 1.2.

`export` reads a results file written here (TSV or Parquet; offline, or a daemon's run file) and writes its
matches (every rank the file holds: `[search] ranks`; lower ranks have no q-value or PEP) as

- ``psm_utils``: psm_utils' lossless TSV (`psm_utils.io.read_file(..., filetype="tsv")`): ``peptidoform``
  (ProForma with ``/charge``), ``spectrum_id``, ``run``, ``is_decoy``, ``score``, ``qvalue``, ``pep``, ``precursor_mz``,
  ``retention_time``, ``protein_list``, ``rank``, ``source``, every feature as ``rescoring:NAME`` and the
  peptide-level q-value as ``meta:peptide_qvalue``;
- ``pin``: Percolator's input (``SpecId`` = run_scan_charge_rank, ``Label`` 1 / -1, ``ScanNr``, ``ExpMass``,
  ``CalcMass``, the features, ``Peptide`` as ``-.PEPTIDE.-``, then the proteins, one a column), what Percolator
  and mokapot rescore;
- ``mzid``: mzIdentML 1.2, schema-valid, its protocol and inputs from the results' provenance (`rtsearch.io.mzid`).

A spectrum is named by its ``spectrum_id`` column (its native id: the mzML ``id``, the MGF ``TITLE``, else
``scan=N``).

The two tables are written here, not through psm_utils' writers: they are a few lines each, and psm_utils would
bring pandas, pydantic and its own readers' dependencies into every rtsearch install for them; psm_utils reads what
is written here in the tests (tests/integration/test_export.py).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from rtsearch.errors import InputError
from rtsearch.io.mzid import read_provenance, write_mzid
from rtsearch.io.perms import as_umask
from rtsearch.io.results import read_results
from rtsearch.matches import RESULT_COLUMNS
from rtsearch.types import PROTON

ExportFormat = Literal["psm_utils", "pin", "mzid"]
_STRINGS = ("run", "peptide", "proteins", "reason")


def export(results: str | Path, out: str | Path, fmt: ExportFormat) -> int:
    """Write ``results``' matched spectra to ``out`` in ``fmt`` (atomically); how many."""
    cols = read_results(results, None)
    missing = [c for c in RESULT_COLUMNS if c not in cols and c not in ("spectrum_id", "rank")]  # those filled below
    if missing:
        raise InputError(f"{results}: not an rtsearch results file (no column {', '.join(missing)})")
    if "spectrum_id" not in cols:  # a file from before the column
        cols["spectrum_id"] = [f"scan={s}" for s in cols["scan"]]
    if "rank" not in cols:  # a file from before ranks: one match a spectrum
        cols["rank"] = [1] * len(cols["scan"])
    rows = [i for i, p in enumerate(cols["peptide"]) if p]
    features = [c for c in cols if c not in RESULT_COLUMNS and c not in _STRINGS and _numeric(cols[c])]
    prov = read_provenance(results) if fmt == "mzid" else {}
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    except OSError as e:
        raise InputError(f"{out}: cannot write ({e.strerror or e})") from None
    os.close(fd)
    try:
        if fmt == "mzid":
            write_mzid(cols, rows, Path(tmp), prov)
        else:
            {"psm_utils": _psm_utils, "pin": _pin}[fmt](cols, rows, features, Path(tmp))
        as_umask(tmp)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(rows)


def _numeric(values: Sequence[Any]) -> bool:
    return all(v is None or isinstance(v, int | float) for v in values[:1000])


def _num(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else repr(float(v)) if isinstance(v, float) \
        else str(v)  # fmt: skip


def _accessions(text: str | None) -> list[str]:
    return [a for a in (text or "").split(";") if a]


def _psm_utils(cols: dict[str, list[Any]], rows: list[int], features: list[str], path: Path) -> None:
    head = ["peptidoform", "spectrum_id", "run", "is_decoy", "score", "qvalue", "pep", "precursor_mz", "retention_time",
            "protein_list", "rank", "source", "meta:peptide_qvalue", *(f"rescoring:{f}" for f in features)]  # fmt: skip
    with open(path, "w", newline="") as fh:
        fh.write("\t".join(head) + "\n")
        for i in rows:
            cells = [f"{cols['peptide'][i]}/{cols['charge'][i]}", cols["spectrum_id"][i], cols["run"][i],
                     str(bool(cols["is_decoy"][i])), _num(cols["score"][i]), _num(cols["q_value"][i]),
                     _num(cols["pep"][i]), _num(cols["precursor_mz"][i]), _num(cols["rt"][i]),
                     repr(_accessions(cols["proteins"][i])), str(cols["rank"][i]), "rtsearch",
                     _num(cols["peptide_q_value"][i]),
                     *(_num(cols[f][i]) for f in features)]  # fmt: skip
            fh.write("\t".join(cells) + "\n")


def _pin(cols: dict[str, list[Any]], rows: list[int], features: list[str], path: Path) -> None:
    features = ["charge", "rt", *(f for f in features if f not in ("charge", "rt"))]  # readers take charge from it
    head = ["SpecId", "Label", "ScanNr", "ExpMass", "CalcMass", *features, "Peptide", "Proteins"]
    with open(path, "w", newline="") as fh:
        fh.write("\t".join(head) + "\n")
        for i in rows:
            z = int(cols["charge"][i])
            exp = (float(cols["precursor_mz"][i]) - PROTON) * z
            calc = (float(cols["calc_mz"][i]) - PROTON) * z
            values = [_num(cols[f][i]) or "0" for f in features]  # Percolator takes no empty feature
            cells = [f"{cols['run'][i]}_{cols['scan'][i]}_{z}_{cols['rank'][i]}", "-1" if cols["is_decoy"][i] else "1",
                     str(cols["scan"][i]), f"{exp:.6f}", f"{calc:.6f}", *values, f"-.{cols['peptide'][i]}.-",
                     *_accessions(cols["proteins"][i])]  # fmt: skip
            fh.write("\t".join(cells) + "\n")
