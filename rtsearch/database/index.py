"""The in-memory peptide index: mass-sorted forms, their sequences and proteins.

Arrays may be NumPy memory maps (see `rtsearch.database.store`); nothing here
copies them whole.
"""

from __future__ import annotations

from dataclasses import dataclass
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
        """`proforma` of each peptide of ``ids`` (all >= 0), the whole batch in a few array operations.

        The daemon's engine names every scored spectrum's match, so this is on the scoring path (~2 µs a
        peptide one by one). Every residue code of the batch is gathered once; a residue carrying a variable
        modification gets a code of its own (`_residue_mod_tokens`); the codes become one string, a character
        each — a placeholder for each token longer than one character (``C[Carbamidomethyl]``, ``M[Oxidation]``),
        which one `str.replace` a token writes out (a `str.translate` when a token is not ASCII) — cut at each
        peptide's bounds, worked out from the tokens' lengths. Peptides the codes cannot write (a terminal
        modification, two on one residue, fixed terminal labels) are written by `proforma`; fewer than
        `ONE_BY_ONE_BELOW` peptides are too.
        """
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) < ONE_BY_ONE_BELOW:  # a lone spectrum's batch: the array operations' fixed cost is more
            return [self.proforma(i) for i in ids.tolist()]
        _, n_fixed, c_fixed = self._tokens()
        table, lengths, single = self._residue_mod_tokens()
        _, where = self._variable_labels()
        base = self.forms.base[ids]
        codes, bounds = _gather(self.bases.residues, self.bases.offsets[base], self.bases.offsets[base + 1])
        codes = codes.astype(np.uint32)
        starts = np.asarray(bounds[:-1], dtype=np.int64)
        mod_pos = np.asarray(self.forms.mod_pos[ids])
        row, slot = np.nonzero(mod_pos >= 0)
        mid = np.asarray(self.forms.mod_id[ids])[row, slot].astype(np.int64)
        at = starts[row] + mod_pos[row, slot]
        slow = np.zeros(len(ids), dtype=bool)
        if n_fixed or c_fixed:
            slow[:] = True
        slow[row[np.asarray(where, dtype=np.int64)[mid] != 0]] = True  # a terminal modification
        _, first = np.unique(at, return_index=True)
        if len(first) < len(at):  # two modifications on one residue
            again = np.ones(len(at), dtype=bool)
            again[first] = False
            slow[row[again]] = True
        residue = np.asarray(where, dtype=np.int64)[mid] == 0
        codes[at[residue]] = _MOD_CODE * (mid[residue] + 1) + codes[at[residue]]
        ends = np.zeros(len(codes) + 1, dtype=np.int64)
        np.cumsum(lengths[codes], out=ends[1:])
        long = lengths[codes] != 1
        kinds = np.unique(codes[long])
        if single is not None and len(kinds) <= 128:  # ASCII tokens (the usual): no Python a character
            # one character a code, a placeholder (0x80 + k) for each longer token, replaced as a whole
            chars = single[codes]
            chars[long] = 0x80 + np.searchsorted(kinds, codes[long])
            text = chars.tobytes().decode("latin-1")
            for k, code in enumerate(kinds.tolist()):
                text = text.replace(chr(0x80 + k), table[code])
        else:
            text = codes.astype("<u4").tobytes().decode("utf-32-le").translate(table)
        cut = ends[bounds].tolist()
        out = [text[a:b] for a, b in zip(cut[:-1], cut[1:], strict=True)]
        for r in np.flatnonzero(slow).tolist():
            out[r] = self.proforma(int(ids[r]))
        return out

    def _residue_mod_tokens(self) -> tuple[dict[int, str], np.ndarray, np.ndarray | None]:
        """The tokens of `proformas`' codes: residue code c -> its token (with its fixed modification), code
        ``_MOD_CODE * (m + 1) + c`` -> that token and variable modification m's tag. A `str.translate` table,
        each code's token length, and (every token ASCII) each one-character token's byte (``None``: some
        token is not ASCII)."""
        cached = self.__dict__.get("_residue_mod_cache")
        if cached is None:
            tokens, _, _ = self._tokens()
            labels, _ = self._variable_labels()
            table: dict[int, str] = {}
            for m, tag in enumerate(["", *(f"[{lab}]" for lab in labels)]):
                for c, tok in enumerate(tokens):
                    if c:
                        table[_MOD_CODE * m + c] = tok + tag
            size = _MOD_CODE * (len(labels) + 1)
            lengths = np.zeros(size, dtype=np.int64)
            single = np.zeros(size, dtype=np.uint8)
            for code, tok in table.items():
                lengths[code] = len(tok)
                if len(tok) == 1:
                    single[code] = ord(tok) if tok.isascii() else 0
            ascii_only = all(tok.isascii() for tok in table.values())
            cached = self.__dict__["_residue_mod_cache"] = (table, lengths, single if ascii_only else None)
        return cached

    def accessions(self, ids: np.ndarray) -> list[list[str]]:
        """`protein_accessions` of each peptide of ``ids`` (all >= 0), as one gather."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) < ONE_BY_ONE_BELOW:
            return [self.protein_accessions(i) for i in ids.tolist()]
        keys, bounds = self.protein_keys(ids)
        flat = self._protein_names()[keys].tolist()
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def protein_keys(self, ids: np.ndarray) -> tuple[np.ndarray, list[int]]:
        """The proteins of each peptide of ``ids`` (all >= 0) as numbers, one gather: a target's protein ``k`` is
        ``k``, a decoy's ``k + len(proteins)`` (the order of `_protein_names`); peptide ``j``'s are
        ``keys[bounds[j]:bounds[j + 1]]``."""
        base = self.forms.base[np.asarray(ids, dtype=np.int64)]
        links, bounds = _gather(self.base_proteins, self.base_protein_offsets[base],
                                self.base_protein_offsets[base + 1])  # fmt: skip
        decoy = np.asarray(self.bases.is_decoy[base], dtype=bool)
        shift = np.repeat(np.where(decoy, len(self.proteins), 0), np.diff(bounds))
        return links.astype(np.int64) + shift, bounds

    def _protein_names(self) -> np.ndarray:
        """The proteins' names, then the same with the decoy prefix (objects: `accessions` gathers them)."""
        cached = self.__dict__.get("_protein_names_cache")
        if cached is None:
            prefix = self.params.decoy_prefix
            cached = np.array([*self.proteins, *(prefix + name for name in self.proteins)] or [""], dtype=object)
            self.__dict__["_protein_names_cache"] = cached
        return cached

    def _variable_labels(self) -> tuple[list[str], list[int]]:
        """Per variable modification id: its label, and where it goes (0 residue, 1 N-term, 2 C-term)."""
        cached = self.__dict__.get("_variable_labels_cache")
        if cached is None:
            var = self.mods.variable
            where = [1 if "n-term" in m.kind else 2 if "c-term" in m.kind else 0 for m in var]
            cached = self.__dict__["_variable_labels_cache"] = ([m.label for m in var], where)
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


ONE_BY_ONE_BELOW = 16  # `proformas`, `accessions`: fewer peptides are named one by one (6 against 61 µs for one)
_MOD_CODE = 256  # `proformas`: residue codes are below this; a modified residue's code is above
