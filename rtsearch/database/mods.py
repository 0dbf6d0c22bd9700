"""Residue masses and modifications by Unimod name.

A modification is written ``Name@Site``: ``Carbamidomethyl@C``,
``Phospho@STY``, ``Acetyl@Protein N-term``, ``Gln->pyro-Glu@N-term Q``.
Sites are residues, ``N-term``/``C-term`` (peptide) or ``Protein N-term``/
``Protein C-term``, optionally followed by the residues they apply to.
Names are Unimod's: the common ones below, any other from the full Unimod table
(`rtsearch.database.unimod`: ``Label:13C(6)@R``, ``UNIMOD:188@R``). A mass may stand for the name:
``+15.9949@M``.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rtsearch.database import unimod
from rtsearch.errors import ConfigError

log = logging.getLogger(__name__)

# Monoisotopic residue masses (Unimod / NIST).
RESIDUE_MASS: dict[str, float] = {
    "G": 57.021463721, "A": 71.037113805, "S": 87.032028435, "P": 97.052763875,
    "V": 99.068413949, "T": 101.047678505, "C": 103.009184505, "L": 113.084064015,
    "I": 113.084064015, "N": 114.042927470, "D": 115.026943065, "Q": 128.058577540,
    "K": 128.094963050, "E": 129.042593135, "M": 131.040484645, "H": 137.058911875,
    "F": 147.068413945, "R": 156.101111050, "Y": 163.063328575, "W": 186.079312980,
    "U": 150.953633405, "O": 237.147726925,
}  # fmt: skip

# Unimod monoisotopic deltas of the modifications rtsearch knows by name.
UNIMOD: dict[str, float] = {
    "Carbamidomethyl": 57.021464,
    "Oxidation": 15.994915,
    "Acetyl": 42.010565,
    "Phospho": 79.966331,
    "Deamidated": 0.984016,
    "Gln->pyro-Glu": -17.026549,
    "Glu->pyro-Glu": -18.010565,
    "Amidated": -0.984016,
    "Methyl": 14.01565,
    "Dimethyl": 28.0313,
    "Carbamyl": 43.005814,
    "Propionamide": 71.037114,
    "GlyGly": 114.042927,
    "TMT6plex": 229.162932,
    "TMTpro": 304.207146,
    "iTRAQ4plex": 144.102063,
    "iTRAQ8plex": 304.20536,
    "Label:13C(6)15N(2)": 8.014199,
    "Label:13C(6)15N(4)": 10.008269,
    "Nitro": 44.985078,
    "Cation:Na": 21.981943,
}

# Residue codes: index into per-index mass tables. 0 is reserved (padding).
ALPHABET = "ACDEFGHIKLMNPQRSTVWYUO"
CODE = {aa: i + 1 for i, aa in enumerate(ALPHABET)}

SiteKind = Literal["residue", "n-term", "c-term", "protein n-term", "protein c-term"]
_MOD_RE = re.compile(r"^\s*(?P<name>[^@]+?)\s*@\s*(?P<site>.+?)\s*$")
_TERMS: dict[str, SiteKind] = {
    "n-term": "n-term",
    "c-term": "c-term",
    "protein n-term": "protein n-term",
    "protein c-term": "protein c-term",
}


@dataclass(frozen=True, slots=True)
class Modification:
    """One modification rule: ``name`` adds ``delta`` Da at ``kind`` sites.

    ``residues`` restricts the site to these residues ("" = any residue at a
    terminus).
    """

    name: str
    delta: float
    kind: SiteKind
    residues: str

    @property
    def label(self) -> str:
        """The ProForma label: the Unimod name, or the signed mass."""
        return self.name if self.name[0] not in "+-" else f"{self.delta:+.4f}"

    def __str__(self) -> str:
        site = self.residues if self.kind == "residue" else f"{self.kind} {self.residues}".strip()
        return f"{self.name}@{site}"


def parse_mod(text: str) -> Modification:
    """Parse ``Name@Site``; unknown names and bad sites are a `ConfigError`, a site Unimod does not list for the name
    a warning (once)."""
    mod = _parse(text)
    if (problem := unlisted_sites(mod)) is not None:
        _warn_once(problem)
    return mod


def _parse(text: str) -> Modification:
    m = _MOD_RE.match(text)
    if not m:
        raise ConfigError(f"modification {text!r}: expected Name@Site, e.g. 'Oxidation@M'")
    name, site = m.group("name"), m.group("site")
    if name[0] in "+-":
        try:
            delta = float(name)
        except ValueError:
            raise ConfigError(f"modification {text!r}: bad mass {name!r}") from None
    elif name in UNIMOD:
        delta = UNIMOD[name]
    elif (found := unimod.mass(name)) is not None:  # any other Unimod name or accession (UNIMOD:188)
        delta = found
    else:
        like = unimod.close(name)
        raise ConfigError(f"modification {text!r}: {name!r} is not a Unimod name or accession"
                          + (f"; did you mean {', '.join(repr(x) for x in like)}?" if like else "")
                          + " (or give its mass: '+15.9949@M')")  # fmt: skip
    low = site.lower().replace("_", " ")
    kind: SiteKind = "residue"
    residues = site
    for word in sorted(_TERMS, key=len, reverse=True):
        if low.startswith(word):
            kind = _TERMS[word]
            residues = site[len(word) :]
            if residues and residues[0] not in " :":  # 'N-terminus' is not 'N-term' on residues I, N, U, S
                term = _TERM_WORDS[kind]
                raise ConfigError(f"modification {text!r}: bad site {site!r}; write {term!r}, or {term!r} and the "
                                  f"residues it applies to ('{name}@{term} Q')")  # fmt: skip
            residues = residues.strip(" :")
            break
    residues = residues.upper()
    bad = [c for c in residues if c not in CODE]
    if bad or (kind == "residue" and not residues):
        raise ConfigError(f"modification {text!r}: bad site {site!r}")
    return Modification(name, delta, kind, residues)


_TERM_WORDS = {"n-term": "N-term", "c-term": "C-term", "protein n-term": "Protein N-term",
               "protein c-term": "Protein C-term"}  # fmt: skip


def unlisted_sites(mod: Modification) -> str | None:
    """What is wrong with ``mod``'s site when Unimod lists none of it for ``mod``'s name (``Phospho@W``: allowed, as
    a search of one's own may want it, but most often a typo), else None."""
    if mod.name[0] in "+-" or (listed := unimod.sites(mod.name)) is None:
        return None
    terminus = "N-term" if mod.kind in ("n-term", "protein n-term") else "C-term" if mod.kind != "residue" else ""
    unlisted = [c for c in mod.residues if c not in listed] if mod.residues else [terminus] * (terminus not in listed)
    if not unlisted:
        return None
    return f"modification {str(mod)!r}: Unimod lists {mod.name} on {', '.join(sorted(listed))}, not on " \
           f"{', '.join(unlisted)}"  # fmt: skip


def refuse_unlisted(texts: tuple[str, ...] | list[str]) -> None:
    """A `ConfigError` for the first of ``texts`` (``Name@Site`` each) on a site Unimod does not list (``--strict``)."""
    for text in texts:
        if (problem := unlisted_sites(_parse(text))) is not None:
            raise ConfigError(f"{problem} (--strict)")


@functools.cache
def _warn_once(message: str) -> None:
    log.warning("%s", message)


@dataclass(frozen=True)
class ModSet:
    """Fixed and variable modifications resolved to mass tables."""

    fixed: tuple[Modification, ...]
    variable: tuple[Modification, ...]

    @classmethod
    def parse(cls, fixed: tuple[str, ...], variable: tuple[str, ...]) -> ModSet:
        fx = tuple(parse_mod(t) for t in fixed)
        for mod in fx:
            if mod.kind != "residue" and mod.residues:
                raise ConfigError(f"fixed modification {mod}: terminal fixed mods take no residue")
            if mod.kind.startswith("protein"):
                raise ConfigError(
                    f"fixed modification {mod}: a protein-terminal modification only applies to some "
                    "peptides; give it as a variable modification"
                )
        seen: dict[str, Modification] = {}
        for mod in fx:
            if mod.kind == "residue":
                for aa in mod.residues:
                    if aa in seen:
                        raise ConfigError(f"two fixed modifications on {aa}: {seen[aa]} and {mod}")
                    seen[aa] = mod
        return cls(fx, tuple(parse_mod(t) for t in variable))

    def residue_masses(self) -> np.ndarray:
        """Mass of each residue code with fixed modifications applied (code 0 = 0)."""
        table = np.zeros(len(ALPHABET) + 1, dtype=np.float64)
        for aa, code in CODE.items():
            table[code] = RESIDUE_MASS[aa]
        for mod in self.fixed:
            if mod.kind == "residue":
                for aa in mod.residues:
                    table[CODE[aa]] += mod.delta
        return table

    def terminal_fixed(self) -> tuple[float, float]:
        """Fixed mass added at the peptide N- and C-terminus."""
        n = sum(m.delta for m in self.fixed if m.kind in ("n-term", "protein n-term"))
        c = sum(m.delta for m in self.fixed if m.kind in ("c-term", "protein c-term"))
        return n, c

    def fixed_label(self, aa: str) -> str:
        """ProForma label of the fixed modification on ``aa``, or ''."""
        for mod in self.fixed:
            if mod.kind == "residue" and aa in mod.residues:
                return mod.label
        return ""
