"""Every Unimod modification by name, from the Unimod tables psims ships (no network).

`mass` resolves a PSI-MS name (``Label:13C(6)``, ``Carbamidomethyl``), a Unimod code or alternative name, or an
accession (``UNIMOD:188``) to its monoisotopic delta, `accession` to its accession; `sites` gives the sites Unimod
lists for it; `close` suggests names for a misspelt one. The table
(1,500-odd modifications) is parsed once, on first use.

Parsed here rather than through psims' own `Unimod` class: that one builds an SQLAlchemy database from the same
XML (1.29 s, against 0.066 s for this parse, on the development machine: bench/library_choices.py, 10:32) and
reads unimod.org unless given a local file; pyteomics' `mass.Unimod` reads another schema (unimod.xml).
"""

from __future__ import annotations

import difflib
import functools
import gzip
import importlib.util
from pathlib import Path

from lxml import etree

from rtsearch.errors import ConfigError

_NS = "{http://www.unimod.org/xmlns/schema/unimod_tables_1}"


VENDORED = ("controlled_vocabulary", "vendor", "unimod_tables.xml.gz")  # inside the psims package


def table_path() -> Path:
    """psims' bundled Unimod tables, found without importing psims (0.33 s of imports, on every process that parses
    a modification, for a 3 MB file read in 0.04 s)."""
    spec = importlib.util.find_spec("psims")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("psims is not installed: it holds the Unimod table modifications are looked up in")
    return Path(spec.submodule_search_locations[0]).joinpath(*VENDORED)


@functools.cache
def _root() -> etree._Element:
    with gzip.open(table_path(), "rb") as fh:
        return etree.fromstring(fh.read())


@functools.cache
def _table() -> tuple[dict[str, float], dict[str, str], dict[str, str]]:
    """(name -> mono mass, lower-case name -> name as Unimod writes it, name -> Unimod record id), every name a
    modification goes by."""
    root = _root()
    masses: dict[str, float] = {}
    record: dict[str, str] = {}
    by_key: dict[str, str] = {}
    for row in root.iter(f"{_NS}modifications_row"):
        name, rid = row.get("ex_code_name") or row.get("code_name"), row.get("record_id")
        mass = float(row.get("mono_mass"))
        by_key[rid] = name
        for alias in (name, f"UNIMOD:{rid}", row.get("code_name"), row.get("full_name")):
            if alias and alias not in masses:
                masses[alias], record[alias] = mass, rid
    for row in root.iter(f"{_NS}alt_names_row"):
        name, alt = by_key.get(row.get("mod_key")), row.get("alt_name")
        if name is not None and alt and alt not in masses:
            masses[alt], record[alt] = masses[name], record[name]
    return masses, {k.lower(): k for k in masses}, record


@functools.cache
def _sites() -> dict[str, frozenset[str]]:
    """Unimod record id -> the sites its specificities list: residues, ``N-term``, ``C-term``."""
    out: dict[str, set[str]] = {}
    for row in _root().iter(f"{_NS}specificity_row"):
        out.setdefault(row.get("mod_key"), set()).add(row.get("one_letter"))
    return {k: frozenset(v) for k, v in out.items()}


def _key(name: str) -> str | None:
    masses, lower, _ = _table()
    return name if name in masses else lower.get(name.lower())


def mass(name: str) -> float | None:
    """The monoisotopic delta of the modification ``name`` (case as Unimod writes it, or any case), else None."""
    key = _key(name)
    return _table()[0][key] if key is not None else None


def accession(name: str) -> str | None:
    """The Unimod accession (``UNIMOD:35``) of the modification ``name``, else None."""
    key = _key(name)
    return None if key is None else f"UNIMOD:{_table()[2][key]}"


def sites(name: str) -> frozenset[str] | None:
    """The sites Unimod lists for the modification ``name`` (residues, ``N-term``, ``C-term``; any position,
    hidden ones too), else None (not a Unimod name)."""
    key = _key(name)
    return None if key is None else _sites().get(_table()[2][key], frozenset())


def close(name: str, n: int = 3) -> list[str]:
    """Unimod names like ``name`` (for an error message)."""
    masses = _table()[0]
    return difflib.get_close_matches(name, [k for k in masses if not k.startswith("UNIMOD:")], n=n, cutoff=0.5)
