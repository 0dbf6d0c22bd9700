"""EncyclopeDIA's spectral libraries (``.dlib``; ``.elib``, the same schema with a run's quantities), entry by
entry, as `rtsearch.library.files` reads MSP and sptxt.

Both are SQLite databases. Table ``entries``: ``PrecursorMz``, ``PrecursorCharge``, ``PeptideModSeq`` (mass
deltas in brackets after their residue, ``AC[+57.021464]DEK``; one before the first residue is N-terminal),
``MassArray`` (zlib, big-endian float64) and ``IntensityArray`` (zlib, big-endian float32) with their decoded
lengths in bytes; table ``peptidetoprotein``: ``PeptideSeq``, ``isDecoy``, ``ProteinAccession``. Deltas become
Unimod names within 0.02 Da (a signed mass otherwise), as in MSP files.

Read with the standard library's sqlite3 and zlib rather than mzspeclib (1.0.7), measured on the shared
libraries (bench/library_choices.py; docs/history/RESULTS.md, 2026-11-25 10:32): it reads PrositLib.dlib (381 entries,
0.056 s; here 0.026 s), cannot open BCS_hela.elib ("Could not guess backend implementation") and failed on
nist-bsa_consensus.msp after 22 s (here 0.14 s); and it would bring SQLAlchemy, click and mzpaf into the core.
"""

from __future__ import annotations

import re
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from rtsearch.database.mods import RESIDUE_MASS
from rtsearch.errors import InputError
from rtsearch.library.files import LibraryEntry, Malformed, _Bad, _label, make_entry

_TOKEN = re.compile(r"(\[[+-]?[0-9.]+\])|([A-Z])")
_COLUMNS = ("PrecursorMz", "PrecursorCharge", "PeptideModSeq", "MassEncodedLength", "MassArray",
            "IntensityEncodedLength", "IntensityArray", "PeptideSeq")  # fmt: skip


def read_encyclopedia(path: str | Path) -> Iterator[LibraryEntry | Malformed]:
    """Every entry of a .dlib/.elib, in the table's order (numbered from 1); `InputError` when it is not one."""
    path = Path(path)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        have = {row[1] for row in con.execute("PRAGMA table_info(entries)")}
        proteins: dict[str, list[str]] = {}
        for seq, decoy, accession in con.execute("SELECT PeptideSeq, isDecoy, ProteinAccession FROM peptidetoprotein"):
            if not decoy:
                proteins.setdefault(seq, []).append(accession)
    except sqlite3.Error as e:
        raise InputError(f"{path}: not an EncyclopeDIA library (SQLite with tables entries, peptidetoprotein): {e}") \
            from None  # fmt: skip
    missing = [c for c in _COLUMNS if c not in have]
    if missing:
        raise InputError(f"{path}: not an EncyclopeDIA library (table entries lacks {', '.join(missing)})")
    try:
        rows = con.execute(f"SELECT {', '.join(_COLUMNS)} FROM entries")
        for number, row in enumerate(rows, 1):
            mz_p, charge, modseq = row[0], row[1], row[2]
            try:
                yield _entry(number, row, ";".join(proteins.get(row[7], [])))
            except _Bad as e:
                yield Malformed(number, f"{modseq}/{charge} ({mz_p})", str(e))
    except sqlite3.Error as e:
        raise InputError(f"{path}: unreadable: {e}") from None
    finally:
        con.close()


def _entry(number: int, row: tuple, protein: str) -> LibraryEntry:
    precursor, charge, modseq, mass_len, mass_blob, int_len, int_blob, _ = row
    if not isinstance(charge, int) or not 1 <= charge <= 10:
        raise _Bad(f"charge {charge!r} out of range")
    sequence, mods = _peptide(str(modseq or ""))
    try:
        mz = np.frombuffer(zlib.decompress(mass_blob), dtype=">f8")
        inten = np.frombuffer(zlib.decompress(int_blob), dtype=">f4")
    except (zlib.error, TypeError, ValueError) as e:
        raise _Bad(f"unreadable peak arrays ({e})") from None
    if mz.nbytes != mass_len or inten.nbytes != int_len or mz.size != inten.size:
        raise _Bad(f"peak arrays of {mz.size} m/z and {inten.size} intensities ({mz.nbytes}/{mass_len}, "
                   f"{inten.nbytes}/{int_len} bytes)")  # fmt: skip
    if not mz.size:
        raise _Bad("no peaks")
    return make_entry(number, sequence, mods, charge, float(precursor), mz.astype(np.float64),
                      inten.astype(np.float32), protein)  # fmt: skip


def _peptide(modseq: str) -> tuple[str, list[tuple[int, float, str]]]:
    """``AC[+57.021464]DEK`` -> ("ACDEK", [(1, 57.021464, "Carbamidomethyl")]); a delta before the first residue
    is N-terminal (position -1)."""
    seq: list[str] = []
    mods: list[tuple[int, float, str]] = []
    covered = 0
    for m in _TOKEN.finditer(modseq):
        if m.start() != covered:
            break
        covered = m.end()
        if m.group(2):
            if m.group(2) not in RESIDUE_MASS:
                raise _Bad(f"unknown residue {m.group(2)!r}")
            seq.append(m.group(2))
        else:
            delta = float(m.group(1)[1:-1])
            mods.append((len(seq) - 1, delta, _label(delta)))
    if covered != len(modseq) or not seq:
        raise _Bad(f"unreadable peptide {modseq!r}")
    return "".join(seq), mods
