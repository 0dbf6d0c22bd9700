"""The in-memory peptide index: mass-sorted forms, their sequences and proteins.

Arrays may be NumPy memory maps (see `rtsearch.database.store`); nothing here
copies them whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch.config import DatabaseConfig
from rtsearch.database.fragments import FragmentIndex, slice_fragments
from rtsearch.database.mods import ALPHABET, ModSet
from rtsearch.database.peptides import Bases, Forms


@dataclass
class PeptideIndex:
    """Everything a search needs, loaded before acquisition starts.

    Peptide index ``i`` (as used by the fragment index and the scorers) is the
    rank of form ``i`` by neutral mass.
    """

    params: DatabaseConfig
    mods: ModSet
    proteins: list[str]
    bases: Bases
    base_missed_cleavages: np.ndarray  # uint8 [n_bases]
    base_protein_offsets: np.ndarray  # int64 [n_bases + 1]
    base_proteins: np.ndarray  # int32, indices into ``proteins``
    forms: Forms  # sorted by mass
    fragments: FragmentIndex
    manifest: dict[str, Any]
    folder: Path | None = None  # where it was loaded from (None: built in memory)

    def __len__(self) -> int:
        return len(self.forms)

    @property
    def residue_mass(self) -> np.ndarray:
        return self.mods.residue_masses()

    @property
    def mass(self) -> np.ndarray:
        return self.forms.mass

    def is_decoy(self, i: int | np.ndarray) -> Any:
        return self.bases.is_decoy[self.forms.base[i]]

    def sequence(self, i: int) -> str:
        b = int(self.forms.base[i])
        codes = self.bases.residues[self.bases.offsets[b] : self.bases.offsets[b + 1]]
        return "".join(ALPHABET[c - 1] for c in codes)

    def length(self, i: int | np.ndarray) -> Any:
        b = np.asarray(self.forms.base[i], dtype=np.int64)
        return self.bases.offsets[b + 1] - self.bases.offsets[b]

    def missed_cleavages(self, i: int | np.ndarray) -> Any:
        return self.base_missed_cleavages[self.forms.base[i]]

    def proforma(self, i: int) -> str:
        """ProForma 2.0 string, fixed modifications written out: ``AC[Carbamidomethyl]M[Oxidation]K``."""
        tokens, n_fixed, c_fixed = self._tokens()
        b = int(self.forms.base[i])
        codes = self.bases.residues[self.bases.offsets[b] : self.bases.offsets[b + 1]].tolist()
        parts = [tokens[c] for c in codes]
        n_term, c_term = list(n_fixed), list(c_fixed)
        for pos, mid in zip(self.forms.mod_pos[i].tolist(), self.forms.mod_id[i].tolist(), strict=True):
            if pos < 0:
                continue
            mod = self.mods.variable[mid]
            if "n-term" in mod.kind:
                n_term.append(mod.label)
            elif "c-term" in mod.kind:
                c_term.append(mod.label)
            else:
                parts[pos] += f"[{mod.label}]"
        pre = "".join(f"[{lab}]" for lab in n_term) + ("-" if n_term else "")
        post = ("-" if c_term else "") + "".join(f"[{lab}]" for lab in c_term)
        return pre + "".join(parts) + post

    def proformas(self, ids: np.ndarray) -> list[str]:
        """`proforma` of each peptide of ``ids`` (all >= 0), as one vectorized lookup.

        Every residue code of the batch is gathered and decoded once; unmodified forms (most)
        are their codes run through one `str.translate` (code -> residue with its fixed
        modification), modified ones are translated in stretches between their modifications
        (`proforma`'s rules). The daemon calls this for every scored spectrum.
        """
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return []
        _, n_fixed, c_fixed = self._tokens()
        table, plain_ok = self._translate()
        labels, where = self._variable_labels()
        tags = [f"[{lab}]" for lab in labels]
        base = self.forms.base[ids]
        codes, bounds = _gather(self.bases.residues, self.bases.offsets[base], self.bases.offsets[base + 1])
        text = codes.tobytes().decode("latin-1")
        mod_pos = np.asarray(self.forms.mod_pos[ids])
        modified = (mod_pos >= 0).any(axis=1)
        rows = np.asarray(modified if plain_ok else np.ones(len(ids), dtype=bool), dtype=bool)
        pos_rows, id_rows = iter(mod_pos[rows].tolist()), iter(np.asarray(self.forms.mod_id[ids[rows]]).tolist())
        out = []
        slow: list[bool] = rows.tolist()
        for a, b, m in zip(bounds[:-1], bounds[1:], slow, strict=True):
            seq = text[a:b]
            if not m:
                out.append(seq.translate(table))
                continue
            # residue modifications go right after their residue: translate the stretches between them
            mods = [(pos, mid) for pos, mid in zip(next(pos_rows), next(id_rows), strict=True) if pos >= 0]
            if len(mods) > 1:
                mods.sort(key=_first)
            n_term, c_term, pieces, prev = list(n_fixed), list(c_fixed), [], 0
            for pos, mid in mods:
                if where[mid] == 1:
                    n_term.append(labels[mid])
                elif where[mid] == 2:
                    c_term.append(labels[mid])
                else:
                    pieces.append(seq[prev : pos + 1].translate(table))
                    pieces.append(tags[mid])
                    prev = pos + 1
            pieces.append(seq[prev:].translate(table))
            if n_term or c_term:
                pre = "".join(f"[{lab}]" for lab in n_term) + ("-" if n_term else "")
                post = ("-" if c_term else "") + "".join(f"[{lab}]" for lab in c_term)
                out.append(pre + "".join(pieces) + post)
            else:
                out.append("".join(pieces))
        return out

    def accessions(self, ids: np.ndarray) -> list[list[str]]:
        """`protein_accessions` of each peptide of ``ids`` (all >= 0), as one gather."""
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return []
        base = self.forms.base[ids]
        links, bounds = _gather(self.base_proteins, self.base_protein_offsets[base],
                                self.base_protein_offsets[base + 1])  # fmt: skip
        names, prefix = self.proteins, self.params.decoy_prefix
        flat = [names[k] for k in links.tolist()]
        decoy = np.asarray(self.bases.is_decoy[base]).tolist()
        return [
            [prefix + name for name in flat[a:b]] if d else flat[a:b]
            for a, b, d in zip(bounds[:-1], bounds[1:], decoy, strict=True)
        ]

    def _variable_labels(self) -> tuple[list[str], list[int]]:
        """Per variable modification id: its label, and where it goes (0 residue, 1 N-term, 2 C-term)."""
        cached = self.__dict__.get("_variable_labels_cache")
        if cached is None:
            var = self.mods.variable
            where = [1 if "n-term" in m.kind else 2 if "c-term" in m.kind else 0 for m in var]
            cached = self.__dict__["_variable_labels_cache"] = ([m.label for m in var], where)
        return cached

    def _translate(self) -> tuple[dict[int, str], bool]:
        """`str.translate` table from residue code to ProForma token; whether it is enough unmodified."""
        cached = self.__dict__.get("_proforma_table")
        if cached is None:
            tokens, n_fixed, c_fixed = self._tokens()
            table = {code: tok for code, tok in enumerate(tokens) if code}
            cached = self.__dict__["_proforma_table"] = (table, not n_fixed and not c_fixed)
        return cached

    def _tokens(self) -> tuple[list[str], tuple[str, ...], tuple[str, ...]]:
        """Per residue code, the residue with its fixed modification; fixed terminal labels (cached)."""
        cached = self.__dict__.get("_proforma_tokens")
        if cached is None:
            tokens = [""] + [aa + (f"[{self.mods.fixed_label(aa)}]" if self.mods.fixed_label(aa) else "")
                             for aa in ALPHABET]  # fmt: skip
            n_fixed = tuple(m.label for m in self.mods.fixed if "n-term" in m.kind)
            c_fixed = tuple(m.label for m in self.mods.fixed if "c-term" in m.kind)
            cached = self.__dict__["_proforma_tokens"] = (tokens, n_fixed, c_fixed)
        return cached

    def protein_accessions(self, i: int) -> list[str]:
        b = int(self.forms.base[i])
        idx = self.base_proteins[self.base_protein_offsets[b] : self.base_protein_offsets[b + 1]]
        prefix = self.params.decoy_prefix if self.bases.is_decoy[b] else ""
        return [prefix + self.proteins[int(k)] for k in idx]

    def slice(self, lo_da: float, hi_da: float, xp: object = np) -> tuple[PeptideIndex, int]:
        """The peptides of neutral mass in [``lo_da``, ``hi_da``] as an index of their own, and the first one's number
        here (a peptide ``i`` there is ``first + i`` here): a partition worker's share of a target too large for
        one device (`rtsearch.cluster`). Proteins and base peptides are shared, not copied."""
        first = int(np.searchsorted(self.forms.mass, lo_da, side="left"))
        last = int(np.searchsorted(self.forms.mass, hi_da, side="right"))
        forms = self.forms.take(np.arange(first, last))
        fragments = slice_fragments(self.fragments, first, last, xp)
        manifest = {**self.manifest, "slice": {"first": first, "last": last, "lo_da": lo_da, "hi_da": hi_da}}
        part = PeptideIndex(self.params, self.mods, self.proteins, self.bases, self.base_missed_cleavages,
                            self.base_protein_offsets, self.base_proteins, forms, fragments, manifest)  # fmt: skip
        return part, first

    def nbytes(self) -> int:
        arrays = [
            self.bases.residues, self.bases.offsets, self.bases.is_decoy, self.base_missed_cleavages,
            self.base_protein_offsets, self.base_proteins, self.forms.base, self.forms.mod_pos,
            self.forms.mod_id, self.forms.mass,
        ]  # fmt: skip
        return int(sum(a.nbytes for a in arrays)) + self.fragments.nbytes


def _gather(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """``values[lo[i]:hi[i]]`` of every ``i`` concatenated, and the bounds of each in the result."""
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    lengths = hi - lo
    bounds = np.zeros(len(lo) + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    idx = np.arange(int(bounds[-1]), dtype=np.int64) + np.repeat(lo - bounds[:-1], lengths)
    return np.asarray(values[idx]), bounds.tolist()


_first = itemgetter(0)
