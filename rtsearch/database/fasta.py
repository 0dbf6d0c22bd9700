"""Protein sequences from FASTA files (read through pyteomics), validated.

A FASTA problem is reported as one line naming the file and the line of the
entry: a header with no sequence (a truncated file), characters that are not
amino-acid letters, or a file with no entries at all.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rtsearch.errors import InputError

# Letters allowed in a protein sequence. B, J, X, Z are ambiguous: kept in the
# protein, but peptides containing them are not indexed. '*' (stop) is dropped
# at the end of a sequence only.
VALID_RESIDUES = frozenset("ACDEFGHIKLMNPQRSTVWYUOBJXZ")
_BAD_CHAR = re.compile(r"[^ACDEFGHIKLMNPQRSTVWYUOBJXZ]")


@dataclass(frozen=True, slots=True)
class Protein:
    accession: str
    sequence: str


def _accession(header: str) -> str:
    """``sp|P02769|ALBU_BOVIN ...`` → ``sp|P02769|ALBU_BOVIN`` (the first word)."""
    return header.split(None, 1)[0] if header.strip() else ""


def _header_lines(path: Path) -> list[int]:
    """1-based line number of every header, for error messages."""
    lines = []
    with _open(path) as fh:
        for i, line in enumerate(fh, 1):
            if line.startswith(">"):
                lines.append(i)
    return lines


def _empty_entry(path: Path) -> tuple[int, str] | None:
    """Line and text of the first header followed by another header or the end of the file."""
    pending: tuple[int, str] | None = None
    with _open(path) as fh:
        for i, line in enumerate(fh, 1):
            if line.startswith(">"):
                if pending is not None:
                    return pending
                pending = (i, line[1:].strip())
            elif line.strip() and not line.startswith(";"):
                pending = None
    return pending


def _open(path: Path) -> TextIO:
    if path.suffix == ".gz":
        import gzip

        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")  # noqa: SIM115


def read_fasta(path: str | Path) -> list[Protein]:
    """Read and validate every protein of one FASTA file.

    Parameters
    ----------
    path
        A FASTA file (optionally gzip-compressed).

    Returns
    -------
    list of Protein
        In file order; sequences upper-cased, a trailing ``*`` removed.

    Raises
    ------
    InputError
        Missing file, an entry without sequence, invalid residues, no entries.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: FASTA file not found")
    proteins: list[Protein] = []
    bad: tuple[int, str, str] | None = None
    try:
        with _open(p) as fh:
            for n, text in enumerate(fh, 1):
                if text.strip() and not text.startswith(";"):
                    if not text.startswith(">"):
                        raise InputError(f"{p}:{n}: not a FASTA file (expected a '>' header, got {text[:20]!r})")
                    break
        # imported here, not with this module: pyteomics imports pandas where that is installed (the GPU machine's
        # image: opening an index imported both, docs/history/RESULTS.md 2026-11-28), and a search reads no FASTA
        from pyteomics import fasta

        with _open(p) as fh:
            # ';' comment lines are dropped here: pyteomics reads them as old-style headers
            stream = io.StringIO("".join(line for line in fh if not line.startswith(";")))
        with stream:
            for k, (header, seq) in enumerate(fasta.FASTA(stream, ignore_comments=True)):
                seq = seq.upper().replace(" ", "")
                if seq.endswith("*"):
                    seq = seq[:-1]
                if not seq:
                    bad = (k, header, "entry has no sequence (truncated file?)")
                    break
                m = _BAD_CHAR.search(seq)
                if m:
                    bad = (k, header, f"invalid residue {m.group(0)!r} at position {m.start() + 1}")
                    break
                proteins.append(Protein(_accession(header), seq))
    except (UnicodeDecodeError, OSError, EOFError) as e:
        raise InputError(f"{p}: cannot read FASTA: {e}") from None
    if bad is None:
        empty = _empty_entry(p)
        if empty is not None:
            line, header = empty
            raise InputError(f"{p}:{line}: entry has no sequence (truncated file?) in entry '{_accession(header)}'")
    if bad is not None:
        k, header, why = bad
        lines = _header_lines(p)
        where = str(lines[k]) if k < len(lines) else "?"
        raise InputError(f"{p}:{where}: {why} in entry '{_accession(header)}'")
    if not proteins:
        raise InputError(f"{p}: no FASTA entries found")
    return proteins


def read_fastas(paths: list[str | Path]) -> list[Protein]:
    """Read several FASTA files; duplicate accessions keep their first sequence."""
    seen: set[str] = set()
    out: list[Protein] = []
    for path in paths:
        for prot in read_fasta(path):
            if prot.accession in seen:
                continue
            seen.add(prot.accession)
            out.append(prot)
    return out
