"""Spectral library files: NIST MSP and SpectraST sptxt, entry by entry.

Both are text blocks that start with ``Name:``, carry ``Key: value`` header
lines, then ``Num peaks:`` / ``NumPeaks:`` and one ``m/z intensity [annotation]``
line per peak. The peptide comes from the name (``SEQ/charge``, optionally with
SpectraST's residue masses, ``AC[160]DEK`` or ``n[43]PEPTIDE``, or NIST's
``_1(4,C,CAM)_46eV`` suffix) and the comment's ``Mods=n/pos,AA,Name/...``
(positions from 0, -1 the N-terminus); it is written in ProForma with Unimod
names (``AC[Carbamidomethyl]DEK``), a mass delta where no name is known.

`read_library` yields a `LibraryEntry` per usable entry and a `Malformed`
(entry number, reason) per entry it cannot use: no peptide, unknown residue or
modification, no peaks, unreadable numbers. It never raises on content; an
unreadable file raises `InputError`.

Read by hand rather than through mzspeclib 1.0.7, which failed on the NIST BSA library after 22 s (here
0.14 s for its 725 entries; bench/library_choices.py, docs/history/RESULTS.md 2026-11-25 10:32).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from rtsearch.database import unimod
from rtsearch.database.mods import RESIDUE_MASS, UNIMOD
from rtsearch.errors import InputError
from rtsearch.types import H2O, PROTON

# names libraries use for Unimod modifications
_ALIASES = {
    "CAM": "Carbamidomethyl", "Carbamidomethylation": "Carbamidomethyl", "Oxidation_M": "Oxidation",
    "Pyro-glu": "Gln->pyro-Glu", "Pyro_glu": "Gln->pyro-Glu", "TMT": "TMT6plex", "iTRAQ": "iTRAQ4plex",
    "Phosphorylation": "Phospho", "Deamidation": "Deamidated",
}  # fmt: skip
# Unimod deltas seen in libraries beyond those rtsearch searches with (rtsearch.database.mods.UNIMOD)
MODS = {**UNIMOD, "Pyro-carbamidomethyl": 39.994915, "ICAT-C": 227.126991, "ICAT-C:13C(9)": 236.157185}
_INLINE = {"O": "Oxidation", "CAM": "Carbamidomethyl", "cam": "Carbamidomethyl", "Cam": "Carbamidomethyl"}
_MASS_TOL = 0.02  # Da: a bracketed mass matches a Unimod delta within this
_NAME_RE = re.compile(r"^(?P<pep>[A-Za-z\[\]0-9.+\-]+)/(?P<z>\d+)")
_NIST_MODS_RE = re.compile(r"_(\d+)((?:\(\d+,[A-Za-z\-],[^)]+\))*)")


@dataclass(frozen=True)
class LibraryEntry:
    """One library spectrum: its peptide, precursor and raw peaks, in file order (``number`` from 1)."""

    number: int
    peptide: str  # ProForma
    sequence: str  # residues only
    mods: tuple[tuple[int, float, str], ...]  # (position, -1 = N-term; mass delta; label)
    charge: int
    precursor_mz: float
    mz: np.ndarray  # float64, ascending
    intensity: np.ndarray  # float32
    protein: str = ""


@dataclass(frozen=True)
class Malformed:
    """An entry that could not be imported, and why."""

    number: int
    name: str
    reason: str


def _label(delta: float) -> str:
    """The Unimod name of a mass delta (the nearest within `_MASS_TOL`: TMTpro and iTRAQ8plex are 0.0018 Da apart),
    else the signed mass (ProForma)."""
    name, mass = min(MODS.items(), key=lambda kv: abs(kv[1] - delta))
    return name if abs(mass - delta) <= _MASS_TOL else f"{delta:+.4f}"


def peptide_mz(sequence: str, mods: tuple[tuple[int, float, str], ...], charge: int) -> float:
    mass = sum(RESIDUE_MASS[a] for a in sequence) + H2O + sum(d for _, d, _ in mods)
    return (mass + charge * PROTON) / charge


def proforma(sequence: str, mods: tuple[tuple[int, float, str], ...]) -> str:
    parts = list(sequence)
    n_term = []
    for pos, _, label in sorted(mods):
        if pos < 0:
            n_term.append(f"[{label}]")
        else:
            parts[pos] += f"[{label}]"
    return "".join(n_term) + ("-" if n_term else "") + "".join(parts)


class _Bad(Exception):
    """An entry's reason for not being imported (`Malformed`)."""


def _bracketed(pep: str) -> tuple[str, list[tuple[int, float, str]]]:
    """SpectraST's ``n[43]AC[160]DEK``: residues and the deltas their bracketed masses imply."""
    seq: list[str] = []
    mods: list[tuple[int, float, str]] = []
    covered: list[str] = []
    for m in re.finditer(r"(n|c|[A-Z])(?:\[([0-9.]+)\])?", pep):
        aa, mass = m.group(1), m.group(2)
        covered.append(m.group(0))
        if aa == "n":
            if mass:
                delta = float(mass) - PROTON  # n[43]: H + 42.01
                mods.append((-1, delta, _label(delta)))
            continue
        if aa == "c":
            continue
        if aa not in RESIDUE_MASS:
            raise _Bad(f"unknown residue {aa!r}")
        if mass:
            delta = float(mass) - RESIDUE_MASS[aa]
            mods.append((len(seq), delta, _label(delta)))
        seq.append(aa)
    if "".join(covered) != pep:
        raise _Bad(f"unreadable peptide {pep!r}")
    return "".join(seq), mods


def _comment_mods(text: str, sequence: str) -> list[tuple[int, float, str]] | None:
    """``Mods=2/0,A,Acetyl/38,K,TMT`` (``Mods=0``: none); ``None`` when the comment has no Mods."""
    m = re.search(r"(?:^|\s)Mods=(\d+)(\S*)", text)
    if m is None:
        return None
    listed = m.group(2)
    # SpectraST: /pos,AA,Name/...; NIST: (pos,AA,Name)(...)
    nested = r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)"  # a name may hold parentheses: ICAT-C:13C(9)
    items = re.findall(nested, listed) if listed.startswith("(") else listed.split("/")[1:]
    out = []
    for item in items:
        try:
            pos_s, aa, name = item.split(",", 2)
            pos = int(pos_s)
        except ValueError:
            raise _Bad(f"unreadable modification {item!r}") from None
        name = _ALIASES.get(name, name)
        delta = MODS.get(name)
        delta = unimod.mass(name) if delta is None else delta  # the common ones, else any Unimod name
        if delta is None:
            raise _Bad(f"unknown modification {name!r}")
        if name == "Acetyl" and pos == 0 and aa != "K":
            pos = -1  # N-terminal acetyl written on the first residue
        if pos >= len(sequence) or (pos >= 0 and sequence[pos] != aa.upper()):
            raise _Bad(f"modification {item!r} does not match the sequence")
        out.append((pos, delta, name))
    if len(out) != int(m.group(1)):
        raise _Bad(f"Mods={m.group(1)} lists {len(out)} modifications")
    return out


def _header_value(headers: dict[str, str], comment: str, *keys: str) -> str | None:
    for k in keys:
        if k in headers:
            return headers[k]
        m = re.search(rf"(?:^|\s){re.escape(k)}=([^\s]+)", comment)
        if m:
            return m.group(1)
    return None


def _entry(number: int, headers: dict[str, str], peaks: list[str]) -> LibraryEntry:
    name = headers.get("Name", "")
    comment = headers.get("Comment", "") or headers.get("Comments", "")
    # NIST's older inline notation, M(O)PEPTIDE: the comment's Mods say the same; without them, known ones
    inline = [(i, tag) for i, tag in enumerate(re.findall(r"[A-Z](?:\(([A-Za-z]+)\))?", name.split("/")[0])) if tag]
    m = _NAME_RE.match(re.sub(r"(?<=[A-Z])\([A-Za-z]+\)", "", name))
    if m is None:
        raise _Bad("no peptide in the name (SEQUENCE/charge expected)")
    pep, charge = m.group("pep"), int(m.group("z"))
    if not 1 <= charge <= 10:
        raise _Bad(f"charge {charge} out of range")
    sequence, mods = _bracketed(pep)
    listed = _comment_mods(comment, sequence)
    nist = _NIST_MODS_RE.match(name[m.end() :])
    if listed is None and nist and nist.group(2):  # "SEQ/2_1(4,C,CAM)_46eV"
        listed = _comment_mods(f"Mods={nist.group(1)}{nist.group(2)}", sequence)
    if listed is None and inline:
        try:
            listed = [(i, MODS[_INLINE[tag]], _INLINE[tag]) for i, tag in inline]
        except KeyError as e:
            raise _Bad(f"unknown inline modification {e.args[0]!r}") from None
    if listed is not None:  # names from the comment; bracketed masses (if any) say the same
        mods = listed
    if not sequence:
        raise _Bad("empty peptide")
    rows = [p.split() for p in peaks if p.strip()]
    if not rows:
        raise _Bad("no peaks")
    try:
        mz = np.array([float(r[0]) for r in rows])
        inten = np.array([float(r[1]) for r in rows])
    except (ValueError, IndexError):
        raise _Bad("unreadable peak line") from None
    given = _header_value(headers, comment, "PrecursorMZ", "Parent", "Mz_exact")
    protein = _header_value(headers, comment, "Protein") or ""
    return make_entry(number, sequence, mods, charge, float(given) if given is not None else None, mz, inten,
                      protein.strip('"'))  # fmt: skip


def make_entry(number: int, sequence: str, mods: list[tuple[int, float, str]], charge: int, precursor: float | None,
               mz: np.ndarray, inten: np.ndarray, protein: str) -> LibraryEntry:  # fmt: skip
    """A `LibraryEntry` of parsed fields, checked (peaks finite, the given precursor m/z that of the peptide);
    raises `_Bad` with the reason otherwise."""
    if not (np.isfinite(mz).all() and np.isfinite(inten).all()) or (inten < 0).any():
        raise _Bad("peaks hold NaN, infinite or negative values")
    order = np.argsort(mz, kind="stable")
    mods_t = tuple(sorted(mods))
    calc = peptide_mz(sequence, mods_t, charge)
    precursor = calc if precursor is None else precursor
    if abs(precursor - calc) > max(1.0, 0.002 * calc):  # a wrong peptide or charge, not rounding
        raise _Bad(f"precursor m/z {precursor:.4f} does not match {proforma(sequence, mods_t)}/{charge} ({calc:.4f})")
    mz, inten = np.asarray(mz, np.float64)[order], np.asarray(inten)[order].astype(np.float32)
    return LibraryEntry(number, proforma(sequence, mods_t), sequence, mods_t, charge, calc, mz, inten, protein)


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", errors="replace")
    return path.open(errors="replace")


def read_library(path: str | Path) -> Iterator[LibraryEntry | Malformed]:
    """Every entry of an MSP or sptxt file (``.gz`` too), in order; see the module docstring (any format:
    `rtsearch.library.formats.read_entries`)."""
    path = Path(path)
    try:
        fh = _open(path)
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from None
    number = 0
    headers: dict[str, str] = {}
    peaks: list[str] = []
    n_peaks = -1

    def finish() -> LibraryEntry | Malformed:
        try:
            if n_peaks >= 0 and len(peaks) != n_peaks:
                raise _Bad(f"{len(peaks)} peak lines, header says {n_peaks}")
            return _entry(number, headers, peaks)
        except _Bad as e:
            return Malformed(number, headers.get("Name", ""), str(e))

    with fh:
        try:
            for line in fh:
                if line.startswith("Name:"):
                    if number:
                        yield finish()
                    number += 1
                    headers, peaks, n_peaks = {"Name": line[5:].strip()}, [], -1
                elif not number or line.startswith("#"):
                    continue
                elif n_peaks >= 0:
                    if line.strip():
                        peaks.append(line)
                elif line.lower().startswith(("num peaks:", "numpeaks:")):
                    try:
                        n_peaks = int(line.split(":", 1)[1])
                    except ValueError:
                        n_peaks = 0
                elif ":" in line:
                    key, _, value = line.partition(":")
                    headers[key.strip()] = value.strip()
        except (OSError, EOFError, UnicodeDecodeError) as e:
            raise InputError(f"{path}: unreadable after entry {number}: {e}") from None
        if number:
            yield finish()
