"""The digest as it was written first, a Python object per peptide: the reference for the columnar one.

`rtsearch.database.digest` must give the same peptides, in the same order, with the same
flags, missed cleavages, proteins and decoys (tests/unit/test_digest_columnar.py).
Cleavage rules here are regular expressions matching the *positions* between two residues
where the enzyme cuts (ExPASy PeptideCutter conventions).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rtsearch.config import DatabaseConfig, Enzyme
from rtsearch.database.digest import PeptideOrigin, decoy_sequence
from rtsearch.database.fasta import Protein

CLEAVAGE_RULES: dict[Enzyme, str] = {
    "trypsin": r"(?<=[KR])(?!P)",
    "trypsin/p": r"(?<=[KR])",
    "lys-c": r"(?<=K)",
    "lys-n": r"(?=K)",
    "asp-n": r"(?=D)",
    "chymotrypsin": r"(?<=[FWYL])(?!P)",
    "nonspecific": r"(?<=[A-Z])(?=[A-Z])",
}


_AMBIGUOUS = re.compile(r"[BJXZ]")


def _sites(seq: str, rule: re.Pattern[str]) -> list[int]:
    return [0] + [m.start() for m in rule.finditer(seq) if 0 < m.start() < len(seq)] + [len(seq)]


def _spans_specific(sites: list[int], mc: int) -> list[tuple[int, int, int]]:
    out = []
    for i in range(len(sites) - 1):
        for k in range(mc + 1):
            j = i + k + 1
            if j >= len(sites):
                break
            out.append((sites[i], sites[j], k))
    return out


def _spans_semi(spans: list[tuple[int, int, int]], lo: int, hi: int) -> list[tuple[int, int, int]]:
    out = set()
    for a, b, k in spans:
        out.add((a, b, k))
        for end in range(a + lo, min(b, a + hi + 1)):
            out.add((a, end, k))
        for start in range(max(a, b - hi), b - lo + 1):
            out.add((start, b, k))
    return sorted(out)


def _spans_nonspecific(length: int, lo: int, hi: int) -> list[tuple[int, int, int]]:
    return [(a, a + n, 0) for a in range(length) for n in range(lo, hi + 1) if a + n <= length]


def reference_digest(
    proteins: Sequence[Protein],
    cfg: DatabaseConfig,
    *,
    progress: Callable[[int], None] | None = None,
) -> dict[str, PeptideOrigin]:
    """Digest proteins into unique peptides within the length bounds.

    Peptides containing an ambiguous residue (B, J, X, Z) are not returned.
    With ``isoleucine_equals_leucine`` the keys have every I written as L, so
    peptides differing only by I/L are stored once.

    Parameters
    ----------
    proteins
        Proteins in index order; ``PeptideOrigin.proteins`` holds their positions.
    cfg
        Enzyme, specificity, missed cleavages, length bounds, Met clipping.
    progress
        Called with the number of proteins digested since the last call.
    """
    rule = re.compile(CLEAVAGE_RULES[cfg.enzyme])
    lo, hi = cfg.min_length, cfg.max_length
    peptides: dict[str, PeptideOrigin] = {}
    il = cfg.isoleucine_equals_leucine
    for p_idx, prot in enumerate(proteins):
        seq = prot.sequence
        starts = [0]
        if cfg.clip_n_term_met and seq.startswith("M") and len(seq) > 1:
            starts.append(1)
        for start in starts:
            sub = seq[start:]
            if cfg.enzyme == "nonspecific":
                spans = _spans_nonspecific(len(sub), lo, hi)
            else:
                spans = _spans_specific(_sites(sub, rule), cfg.missed_cleavages)
                if cfg.specificity == "semi":
                    spans = _spans_semi(spans, lo, hi)
            for a, b, k in spans:
                n = b - a
                if n < lo or n > hi or (start and a != 0):
                    continue
                pep = sub[a:b]
                if _AMBIGUOUS.search(pep):
                    continue
                key = pep.replace("I", "L") if il else pep
                origin = peptides.get(key)
                if origin is None:
                    origin = peptides[key] = PeptideOrigin(sequence=pep, missed_cleavages=k)
                if not origin.proteins or origin.proteins[-1] != p_idx:
                    origin.proteins.append(p_idx)
                if a == 0:
                    origin.protein_n_term = True
                if start + b == len(seq):
                    origin.protein_c_term = True
                origin.missed_cleavages = min(origin.missed_cleavages, k)
        if progress is not None and (p_idx & 255) == 255:
            progress(256)
    if progress is not None:
        progress(len(proteins) & 255)
    return peptides


def reference_decoy_sources(peptides: dict[str, PeptideOrigin], cfg: DatabaseConfig) -> list[int]:
    """Targets (by position) whose reversed sequence is not itself a target, as the first build loop chose them."""
    keys = peptides.keys()
    out = []
    for i, origin in enumerate(peptides.values()):
        d = decoy_sequence(origin.sequence, cfg.enzyme)
        if (d.replace("I", "L") if cfg.isoleucine_equals_leucine else d) not in keys:
            out.append(i)
    return out
