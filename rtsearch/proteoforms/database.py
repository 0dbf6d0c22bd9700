"""The proteoform database of a top-down search, built from FASTA proteins in arrays (no Python object a residue).

A protein is its prefix masses: the sums of its first 0, 1, …, n residue masses (fixed modifications
included), which spectral alignment matches against a spectrum's PRM masses (CUDA-TP; TopPIC). Each protein
has one or more N-terminal forms (initiator Met kept or cleaved, acetylated or not), and the known PTMs are
masses with the residues they may sit on, for the alignment's known shifts::

    residues   M K R I S T … | M A E … | …          uint8 codes (`rtsearch.database.mods.CODE`), one array
    offsets    0             n0        n0+n1 …       protein k is residues[offsets[k]:offsets[k+1]]
    prefix     0 m1 m1+m2 … M0 | 0 m1 … M1 | …       float64, n+1 per protein, at offsets[k] + k
    forms      (protein, start, N-terminal delta, kind): P0/none, P0/nme, P0/nme_acetyl, P1/none, …
               the form's mass = prefix[n] - prefix[start] + delta + H2O

Targets come first, then one decoy per target (``decoys``: its residues shuffled with a seed of its own, the
first kept so the same N-terminal forms apply, or reversed after the first; accession ``DECOY_`` + the
target's), as TopPIC's ``DECOY_`` proteins. Proteins with residues of no defined mass (B, J, X, Z) and
proteins longer than ``max_length`` are left out and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from rtsearch.config import NTermForm, ProteoformConfig, choices
from rtsearch.database.arrays import ranges
from rtsearch.database.fasta import Protein
from rtsearch.database.mods import CODE, UNIMOD, ModSet, parse_mod
from rtsearch.errors import ConfigError

WATER = 18.010564684
ACETYL = UNIMOD["Acetyl"]
_LOOKUP = np.zeros(256, dtype=np.uint8)  # byte -> residue code (0: no mass)
for _aa, _code in CODE.items():
    _LOOKUP[ord(_aa)] = _code
_FORM_KINDS = choices(NTermForm)


@dataclass
class KnownShifts:
    """The known PTMs the alignment may place: names, masses (Da) and the residue codes each may sit on."""

    names: list[str]
    mass: np.ndarray  # float64
    sites: np.ndarray  # bool [ptm, 1 + len(CODE)]: sites[k, code]

    @classmethod
    def parse(cls, specs: tuple[str, ...]) -> KnownShifts:
        mods = [parse_mod(s) for s in specs]
        sites = np.zeros((len(mods), len(CODE) + 1), dtype=bool)
        for k, m in enumerate(mods):
            if m.kind != "residue":
                raise ConfigError(f"[proteoforms] known_ptms: {m} is not on residues (N-terminal forms are "
                                  "n_term_forms)")  # fmt: skip
            sites[k, [CODE[aa] for aa in m.residues]] = True
        return cls([str(m) for m in mods], np.array([m.delta for m in mods], dtype=np.float64), sites)


@dataclass
class ProteoformDatabase:
    """Proteins, their prefix masses and N-terminal forms (see the module docstring)."""

    accessions: list[str]
    residues: np.ndarray  # uint8 codes
    offsets: np.ndarray  # int64 [proteins + 1]
    is_decoy: np.ndarray  # bool [proteins]
    prefix: np.ndarray  # float64 [residues + proteins]
    form_protein: np.ndarray  # int32 [forms]
    form_start: np.ndarray  # int16: residues cleaved before the form (0 or 1)
    form_delta: np.ndarray  # float64: the N-terminal modification's mass
    form_kind: np.ndarray  # int8: index into `NTermForm`'s values
    form_mass: np.ndarray  # float64: the form's neutral mass, no unknown shift
    known: KnownShifts
    params: ProteoformConfig
    counts: dict[str, int] = field(default_factory=dict)

    def prefix_of(self, protein: int) -> np.ndarray:
        """Protein ``protein``'s n+1 prefix masses."""
        a, b = int(self.offsets[protein]), int(self.offsets[protein + 1])
        return self.prefix[a + protein : b + protein + 1]

    def form_prefix(self, form: int) -> np.ndarray:
        """Form ``form``'s prefix masses: 0, then its residues' running sums with its N-terminal modification."""
        prefix = self.prefix_of(int(self.form_protein[form]))
        start = int(self.form_start[form])
        out = prefix[start:] - prefix[start]
        out[1:] += self.form_delta[form]
        return out

    @cached_property
    def composition(self) -> tuple[np.ndarray, np.ndarray]:
        """The target proteins' distinct residue masses (Da, fixed modifications included; I and L one) and each
        one's share of their residues: the random protein of `rtsearch.scoring.topdown.generating`."""
        k = np.repeat(np.arange(len(self.accessions)), np.diff(self.offsets))
        at = np.arange(self.residues.shape[0]) + k  # each residue's prefix mass before it
        masses = (self.prefix[at + 1] - self.prefix[at])[~self.is_decoy[k]]
        values, inverse = np.unique(np.round(masses, 6), return_inverse=True)
        counts = np.bincount(inverse, minlength=values.shape[0]).astype(np.float64)
        return values, counts / max(counts.sum(), 1.0)

    def sequence(self, protein: int) -> str:
        a, b = int(self.offsets[protein]), int(self.offsets[protein + 1])
        return "".join(_LETTERS[self.residues[a:b]].tolist())


_LETTERS = np.array(["", *CODE], dtype=object)


def build_proteoforms(proteins: list[Protein], cfg: ProteoformConfig) -> ProteoformDatabase:
    """The database of ``proteins`` under ``cfg`` (see the module docstring)."""
    known = KnownShifts.parse(cfg.known_ptms)
    masses = ModSet.parse(cfg.fixed_mods, ()).residue_masses()  # by code, fixed modifications added
    kept, ambiguous, too_long = [], 0, 0
    for p in proteins:
        if len(p.sequence) > cfg.max_length:
            too_long += 1
        elif p.sequence and _LOOKUP[np.frombuffer(p.sequence.encode(), np.uint8)].all():
            kept.append(p)
        else:
            ambiguous += 1
    lengths = np.array([len(p.sequence) for p in kept], dtype=np.int64)
    codes = _LOOKUP[np.frombuffer("".join(p.sequence for p in kept).encode(), np.uint8)]
    accessions = [p.accession for p in kept]
    is_decoy = np.zeros(len(kept), dtype=bool)
    if cfg.decoys != "none" and kept:
        codes = np.concatenate([codes, _decoys(codes, lengths, cfg)])
        lengths = np.concatenate([lengths, lengths])
        accessions += [cfg.decoy_prefix + a for a in accessions]
        is_decoy = np.r_[is_decoy, np.ones(len(kept), dtype=bool)]
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    prefix = _prefix(masses[codes], offsets)
    forms = _forms(codes, offsets, prefix, cfg.n_term_forms)
    counts = {"proteins": len(kept), "decoys": int(is_decoy.sum()), "left_out_ambiguous": ambiguous,
              "left_out_too_long": too_long, "forms": int(forms[0].shape[0]), "residues": int(codes.shape[0])}
    return ProteoformDatabase(accessions, codes, offsets, is_decoy, prefix, *forms, known, cfg, counts)


def _decoys(codes: np.ndarray, lengths: np.ndarray, cfg: ProteoformConfig) -> np.ndarray:
    """Each protein's decoy residues: the first kept, the rest shuffled (a seeded generator a protein) or
    reversed."""
    out = codes.copy()
    starts = np.cumsum(lengths) - lengths
    for k, (a, n) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        rest = out[a + 1 : a + n]
        if cfg.decoys == "reverse":
            out[a + 1 : a + n] = rest[::-1]
        else:
            np.random.default_rng((cfg.decoy_seed, k)).shuffle(rest)
    return out


def _prefix(mass: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """n+1 prefix masses a protein, concatenated (protein k's at offsets[k] + k)."""
    total = np.zeros(mass.shape[0] + 1)
    np.cumsum(mass, out=total[1:])
    row, at = ranges(offsets[:-1], offsets[1:] + 1)  # each protein's positions 0..n, inclusive
    return total[at] - total[offsets[:-1]][row]


def _forms(codes: np.ndarray, offsets: np.ndarray, prefix: np.ndarray,
           kinds: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(protein, start, delta, kind, mass) of every N-terminal form that applies (NME needs an initiator Met
    and a protein of more than one residue)."""
    n = offsets.shape[0] - 1
    lengths = np.diff(offsets)
    met = np.zeros(n, dtype=bool)
    met[lengths > 0] = codes[offsets[:-1][lengths > 0]] == CODE["M"]
    full = prefix[offsets[1:] + np.arange(n)]  # prefix[n] of each protein
    first = prefix[offsets[:-1] + np.arange(n) + np.minimum(lengths, 1)]  # its first residue's mass
    parts: list[Any] = []
    for kind in kinds:
        start = 1 if kind in ("nme", "nme_acetyl") else 0
        delta = ACETYL if kind in ("nme_acetyl", "m_acetyl") else 0.0
        ok = met & (lengths > 1) if start or kind == "m_acetyl" else np.ones(n, dtype=bool)
        rows = np.flatnonzero(ok)
        mass = full[rows] - (first[rows] if start else 0.0) + delta + WATER
        parts.append((rows, np.full(rows.shape[0], start), np.full(rows.shape[0], delta),
                      np.full(rows.shape[0], _FORM_KINDS.index(kind)), mass))  # fmt: skip
    protein = np.concatenate([p[0] for p in parts])
    order = np.lexsort((np.concatenate([p[3] for p in parts]), protein))  # by protein, then kind
    cols = [np.concatenate([p[i] for p in parts])[order] for i in range(5)]
    return (cols[0].astype(np.int32), cols[1].astype(np.int16), cols[2].astype(np.float64),
            cols[3].astype(np.int8), cols[4].astype(np.float64))  # fmt: skip
