"""Every Unimod modification by name, from the Unimod tables psims ships (no network).

`mass` resolves a PSI-MS name (``Label:13C(6)``, ``Carbamidomethyl``), a Unimod code or alternative name, or an
accession (``UNIMOD:188``) to its monoisotopic delta; `close` suggests names for a misspelt one. The table
(1,500-odd modifications) is parsed once, on first use.

Parsed here rather than through psims' own `Unimod` class: that one builds an SQLAlchemy database from the same
XML (1.29 s, against 0.066 s for this parse, on the development machine: bench/library_choices.py, 10:32) and
reads unimod.org unless given a local file; pyteomics' `mass.Unimod` reads another schema (unimod.xml).
"""

from __future__ import annotations

import difflib
import functools

from lxml import etree

_NS = "{http://www.unimod.org/xmlns/schema/unimod_tables_1}"


@functools.cache
def _table() -> tuple[dict[str, float], dict[str, str]]:
    """(name -> mono mass, lower-case name -> name as Unimod writes it), every name a modification goes by."""
    from psims.controlled_vocabulary.vendor import _use_vendored_unimod_xml

    root = etree.fromstring(_use_vendored_unimod_xml().read())
    masses: dict[str, float] = {}
    by_key: dict[str, str] = {}
    for row in root.iter(f"{_NS}modifications_row"):
        name, mass = row.get("ex_code_name") or row.get("code_name"), float(row.get("mono_mass"))
        masses.setdefault(name, mass)
        masses.setdefault(f"UNIMOD:{row.get('record_id')}", mass)
        by_key[row.get("record_id")] = name
        for alias in (row.get("code_name"), row.get("full_name")):
            if alias:
                masses.setdefault(alias, mass)
    for row in root.iter(f"{_NS}alt_names_row"):
        name = by_key.get(row.get("mod_key"))
        if name is not None and row.get("alt_name"):
            masses.setdefault(row.get("alt_name"), masses[name])
    return masses, {k.lower(): k for k in masses}


def mass(name: str) -> float | None:
    """The monoisotopic delta of the modification ``name`` (case as Unimod writes it, or any case), else None."""
    masses, lower = _table()
    if name in masses:
        return masses[name]
    key = lower.get(name.lower())
    return masses[key] if key is not None else None


def close(name: str, n: int = 3) -> list[str]:
    """Unimod names like ``name`` (for an error message)."""
    masses, _ = _table()
    return difflib.get_close_matches(name, [k for k in masses if not k.startswith("UNIMOD:")], n=n, cutoff=0.5)
