"""Proteins → unique peptide sequences with every protein they come from, as columns.

Cleavage rules follow ExPASy PeptideCutter: a *site* is the boundary before text
position ``p`` when the residues on either side satisfy the enzyme's rule.
Everything is an array operation over all proteins at once (a 20,000-protein
FASTA holds ~9 M residues and ~3 M spans); no Python object per peptide::

    text    M A E K P L L R G H I K W W D D R A A C E | M S K ...   every protein, concatenated
    sites   ^             ^       ^         ^         ^ ^     ^     protein ends and cleavage sites
    spans   (a, b, k): two sites of one protein with k sites between them (k ≤ missed cleavages);
            semi-specific adds every prefix and suffix of a span, nonspecific every substring;
            Met clipping adds spans from the residue after an initiator Met
    keys    two polynomial hashes of each span (odd bases, mod 2^64) and its length
            (`rtsearch.database.seqkeys`):
            h(s) = Σ code(s_i) · B^i, from prefix sums, so a span's key costs O(1)
    unique  spans grouped by key (exact: a first-hash tie with different second hash or
            length falls back to sorting on all three); peptides numbered by first occurrence
            (protein order, then unclipped before clipped, then start, end, missed cleavages)

The same order and values as a per-peptide Python digest; tests/digest_reference.py holds
that digest and tests/unit/test_digest_columnar.py compares the two on real FASTA files.
Why not `pyteomics.parser.cleave`: it gives a Python set of strings per protein, the per-peptide
Python this replaced — on the 20,000-protein bench FASTA, digest 6.0 s and decoys 2.0 s that way,
2.0 and 0.9 s here (development machine), and the whole index built in 22.47 s before, 5.7–6.6 s
now on the GPU machine (docs/history/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rtsearch.config import DatabaseConfig, Enzyme
from rtsearch.database import seqkeys
from rtsearch.database.arrays import argsort_stable, ranges, take_rows
from rtsearch.database.fasta import Protein
from rtsearch.database.seqkeys import Keys, decoy_keys, group_ids, span_keys


@dataclass(frozen=True)
class Cleavage:
    """Where an enzyme cuts: after ``after`` unless ``not_before`` follows, or before ``before``."""

    after: str = ""
    not_before: str = ""
    before: str = ""
    everywhere: bool = False


CLEAVAGE_RULES: dict[Enzyme, Cleavage] = {
    "trypsin": Cleavage(after="KR", not_before="P"),
    "trypsin/p": Cleavage(after="KR"),
    "lys-c": Cleavage(after="K"),
    "lys-n": Cleavage(before="K"),
    "asp-n": Cleavage(before="D"),
    "chymotrypsin": Cleavage(after="FWYL", not_before="P"),
    "nonspecific": Cleavage(everywhere=True),
}

# Enzymes that cut N-terminal to their residue: decoys keep the first residue.
CUTS_BEFORE: frozenset[Enzyme] = frozenset(e for e, r in CLEAVAGE_RULES.items() if r.before)


@dataclass(slots=True)
class PeptideOrigin:
    """One peptide's row of a `Digest` (for inspection; large digests stay columnar)."""

    sequence: str = ""
    proteins: list[int] = field(default_factory=list)
    protein_n_term: bool = False
    protein_c_term: bool = False
    missed_cleavages: int = 0


@dataclass
class Digest:
    """Unique peptides in order of first occurrence; each a span of ``text``."""

    text: np.ndarray  # uint8 ASCII, every protein concatenated
    start: np.ndarray  # int64 [n], first occurrence in text
    length: np.ndarray  # int64 [n]
    missed_cleavages: np.ndarray  # uint8 [n], fewest over occurrences
    protein_n_term: np.ndarray  # bool [n], at a protein N-terminus (after clipping) anywhere
    protein_c_term: np.ndarray  # bool [n]
    protein_offsets: np.ndarray  # int64 [n + 1], CSR into proteins
    proteins: np.ndarray  # int32, ascending per peptide
    key: Keys  # I = L when configured
    decoy_key: Keys  # of each peptide's decoy (`decoy_sequence`)
    decoy_keeps_first: bool

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def decoy_sources(self, xp: Any = np) -> np.ndarray:
        """Peptides whose decoy is not itself a target peptide (``int64``, ascending)."""
        n = len(self)
        order, gid, heads = group_ids(Keys.concat([self.key, self.decoy_key]), xp)
        has_target = np.logical_or.reduceat(order < n, heads) if heads.size else np.zeros(0, bool)
        group_of = np.empty_like(gid)
        group_of[order] = gid
        return np.flatnonzero(~has_target[group_of[n:]])

    def positions(self, decoy_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Text positions of every target's residues, then of the decoys of ``decoy_of``, and CSR offsets."""
        a = np.concatenate([self.start, self.start[decoy_of]])
        n = np.concatenate([self.length, self.length[decoy_of]])
        offsets = np.zeros(n.shape[0] + 1, dtype=np.int64)
        np.cumsum(n, out=offsets[1:])
        t, total = int(offsets[len(self)]), int(offsets[-1])
        idx: type[np.signedinteger[Any]] = np.int32 if max(total, self.text.shape[0]) < 2**31 - 2 else np.int64
        a, shift = a.astype(idx), offsets[:-1].astype(idx)  # int32 where it fits: half the bytes to touch
        g = np.arange(total, dtype=idx)  # position in the output
        out = np.repeat(a - shift, n)  # targets: a + j = (a - offset) + g
        out[:t] += g[:t]
        d_off, d_a, d_n = shift[len(self) :], a[len(self) :], n[len(self) :].astype(idx)
        d_n_rep = n[len(self) :]
        if self.decoy_keeps_first:  # a, then a + n - j = (a + n + offset) - g, j ≥ 1
            out[t:] = np.repeat(d_a + d_n + d_off, d_n_rep) - g[t:]
            out[d_off] = d_a
        else:  # a + n - 2 - j = (a + n - 2 + offset) - g for j < n - 1, then a + n - 1
            out[t:] = np.repeat(d_a + d_n - 2 + d_off, d_n_rep) - g[t:]
            out[d_off + d_n - 1] = d_a + d_n - 1
        return out, offsets

    def to_dict(self, il: bool = False) -> dict[str, PeptideOrigin]:
        """``{sequence (I written L if il): PeptideOrigin}`` — a Python object per peptide."""
        raw = self.text.tobytes().decode("ascii")
        out = {}
        for i in range(len(self)):
            seq = raw[self.start[i] : self.start[i] + self.length[i]]
            prots = self.proteins[self.protein_offsets[i] : self.protein_offsets[i + 1]].tolist()
            origin = PeptideOrigin(seq, prots, bool(self.protein_n_term[i]), bool(self.protein_c_term[i]),
                                   int(self.missed_cleavages[i]))  # fmt: skip
            out[seq.replace("I", "L") if il else seq] = origin
        return out


def _member(text: np.ndarray, letters: str) -> np.ndarray:
    """``text[i] in letters``, by table lookup."""
    table = np.zeros(256, dtype=bool)
    table[list(letters.encode())] = True
    return table[text]


def _sites(text: np.ndarray, bounds: np.ndarray, rule: Cleavage) -> tuple[np.ndarray, np.ndarray]:
    """Every protein's sites in order, its two ends included: (protein, text position)."""
    is_site = np.zeros(text.shape[0] + 1, dtype=bool)
    if rule.everywhere:
        is_site[1:-1] = True
    elif rule.after:
        is_site[1:-1] = _member(text[:-1], rule.after) & ~_member(text[1:], rule.not_before)
    else:
        is_site[1:-1] = _member(text[1:], rule.before)
    is_site[bounds] = False
    inner = np.flatnonzero(is_site)
    n_prot = bounds.shape[0] - 1
    prot = np.concatenate([np.arange(n_prot), np.searchsorted(bounds, inner, side="right") - 1, np.arange(n_prot)])
    pos = np.concatenate([bounds[:-1], inner, bounds[1:]])
    order = np.lexsort((pos, prot))
    return prot[order], pos[order]


@dataclass
class _Spans:
    prot: np.ndarray
    clipped: np.ndarray  # bool: starts after an initiator Met that was clipped
    a: np.ndarray
    b: np.ndarray
    k: np.ndarray

    @staticmethod
    def concat(parts: Sequence[_Spans]) -> _Spans:
        return _Spans(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("prot", "clipped", "a", "b", "k")))

    def take(self, idx: np.ndarray) -> _Spans:
        return _Spans(self.prot[idx], self.clipped[idx], self.a[idx], self.b[idx], self.k[idx])


def _specific(prot: np.ndarray, pos: np.ndarray, clip_at: np.ndarray, mc: int) -> _Spans:
    """Spans between sites with at most ``mc`` sites inside; from each clipped start too."""
    parts = []
    n = prot.shape[0]
    for k in range(mc + 1):
        i = np.arange(max(n - k - 1, 0))
        i = i[prot[i] == prot[i + k + 1]]
        parts.append(_Spans(prot[i], np.zeros(i.shape[0], bool), pos[i], pos[i + k + 1], np.full(i.shape[0], k)))
    # after clipping, a protein starts at its residue 1: its spans run to its sites beyond
    stride = int(pos[-1]) + 2 if n else 1
    key = prot * stride + pos
    first = np.searchsorted(key, clip_at[:, 1] * stride + clip_at[:, 0], side="right")
    for k in range(mc + 1):
        j = first + k
        ok = j < n
        ok[ok] = prot[j[ok]] == clip_at[ok, 1]
        c = clip_at[ok]
        parts.append(_Spans(c[:, 1], np.ones(c.shape[0], bool), c[:, 0], pos[j[ok]], np.full(c.shape[0], k)))
    return _Spans.concat(parts)


def _semi(s: _Spans, lo: int, hi: int) -> _Spans:
    """Each span with every prefix and suffix of it within the length bounds."""
    r1, end = ranges(s.a + lo, np.minimum(s.b, s.a + hi + 1))
    r2, begin = ranges(np.maximum(s.a, s.b - hi), s.b - lo + 1)
    pre, suf = s.take(r1), s.take(r2)
    pre.b, suf.a = end, begin
    return _Spans.concat([s, pre, suf])


def _nonspecific(bounds: np.ndarray, clip_at: np.ndarray, lo: int, hi: int) -> _Spans:
    """Every substring of lo..hi residues; from each clipped start too."""
    n_prot = bounds.shape[0] - 1
    prot = np.concatenate([np.repeat(np.arange(n_prot), np.diff(bounds)), clip_at[:, 1]])
    a = np.concatenate([np.arange(int(bounds[-1])), clip_at[:, 0]])
    clipped = np.arange(a.shape[0]) >= int(bounds[-1])
    row, b = ranges(a + lo, np.minimum(a + hi, bounds[prot + 1]) + 1)
    return _Spans(prot[row], clipped[row], a[row], b, np.zeros(row.shape[0], dtype=np.int64))


def digest(
    proteins: Sequence[Protein],
    cfg: DatabaseConfig,
    *,
    xp: Any = np,
    progress: Callable[[int], None] | None = None,
) -> Digest:
    """Digest proteins into unique peptides within the length bounds.

    Peptides containing an ambiguous residue (B, J, X, Z) are not returned. With
    ``isoleucine_equals_leucine`` peptides differing only by I/L are one peptide,
    spelled as first seen.

    Parameters
    ----------
    proteins
        Proteins in index order; ``Digest.proteins`` holds their positions.
    cfg
        Enzyme, specificity, missed cleavages, length bounds, Met clipping.
    xp
        Array module for the sorts (CuPy on a GPU machine; the same result).
    progress
        Called with the number of proteins digested.
    """
    seqs = [p.sequence for p in proteins]
    bounds = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in seqs], out=bounds[1:])
    text = np.frombuffer("".join(seqs).encode("ascii"), dtype=np.uint8)
    lo, hi = cfg.min_length, cfg.max_length
    starts = bounds[:-1]
    clip = np.zeros(len(seqs), dtype=bool)
    if cfg.clip_n_term_met and text.shape[0]:
        has = np.diff(bounds) > 1
        clip[has] = text[starts[has]] == ord("M")
    clip_at = np.stack([starts[clip] + 1, np.flatnonzero(clip)], axis=1)  # (text position, protein)
    if cfg.enzyme == "nonspecific":
        spans = _nonspecific(bounds, clip_at, lo, hi)
    else:
        spans = _specific(*_sites(text, bounds, CLEAVAGE_RULES[cfg.enzyme]), clip_at, cfg.missed_cleavages)
        if cfg.specificity == "semi":
            spans = _semi(spans, lo, hi)
            starts_at = np.where(spans.clipped, starts[spans.prot] + 1, -1)
            spans = spans.take(np.flatnonzero(~spans.clipped | (spans.a == starts_at)))
    amb = np.zeros(text.shape[0] + 1, dtype=np.int64)
    np.cumsum(_member(text, "BJXZ"), out=amb[1:])
    n = spans.b - spans.a
    keep = (n >= lo) & (n <= hi) & (amb[spans.b] == amb[spans.a])
    spans = spans.take(np.flatnonzero(keep))
    spans = spans.take(np.lexsort((spans.k, spans.b, spans.a, spans.clipped, spans.prot)))
    hashers = seqkeys.hashers(seqkeys.key_codes(text, cfg.isoleucine_equals_leucine))
    keys = span_keys(hashers, spans.a, spans.b)
    order, gid, heads = group_ids(keys, xp)
    first = order[heads]  # each group's first occurrence (rows are in occurrence order)
    pep_order = argsort_stable(first, xp)
    pep_of_group = np.empty_like(pep_order)
    pep_of_group[pep_order] = np.arange(pep_order.shape[0])
    reps = first[pep_order]
    s = spans.take(order)
    n_term = (s.a == starts[s.prot]) | s.clipped
    c_term = s.b == bounds[s.prot + 1]
    # rows of a group are in occurrence order, so their proteins ascend: drop repeats in place
    distinct = np.ones(s.prot.shape[0], dtype=bool)
    distinct[1:] = (gid[1:] != gid[:-1]) | (s.prot[1:] != s.prot[:-1])
    by_group = np.zeros(heads.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(gid[distinct], minlength=heads.shape[0]), out=by_group[1:])
    offsets, prot = take_rows(by_group, s.prot[distinct].astype(np.int32), pep_order)
    if progress is not None:
        progress(len(seqs))
    keep_first = cfg.enzyme in CUTS_BEFORE
    start, length = spans.a[reps], spans.b[reps] - spans.a[reps]
    return Digest(
        text=text, start=start, length=length,
        missed_cleavages=np.minimum.reduceat(s.k, heads)[pep_order].astype(np.uint8) if heads.size else
        np.zeros(0, np.uint8),
        protein_n_term=np.logical_or.reduceat(n_term, heads)[pep_order] if heads.size else np.zeros(0, bool),
        protein_c_term=np.logical_or.reduceat(c_term, heads)[pep_order] if heads.size else np.zeros(0, bool),
        protein_offsets=offsets, proteins=prot, key=keys.take(reps),
        decoy_key=decoy_keys(hashers, start, length, keep_first), decoy_keeps_first=keep_first,
    )  # fmt: skip


def decoy_sequence(seq: str, enzyme: Enzyme) -> str:
    """Reverse a peptide, keeping the residue the enzyme cut next to in place.

    ``PEPTIDEK`` → ``EDITPEPK`` (trypsin); ``DPEPTIDE`` → ``DEDITPEP`` (Asp-N).
    """
    if len(seq) < 2:
        return seq
    if enzyme in CUTS_BEFORE:
        return seq[0] + seq[:0:-1]
    return seq[-2::-1] + seq[-1]
