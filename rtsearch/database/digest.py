"""Proteins → unique peptide sequences with every protein they come from.

Cleavage rules are regular expressions matching the *positions* between two
residues where the enzyme cuts (ExPASy PeptideCutter conventions).
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import logging
import multiprocessing
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rtsearch.config import DatabaseConfig, Enzyme
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

# Enzymes that cut N-terminal to their residue: decoys keep the first residue.
CUTS_BEFORE: frozenset[Enzyme] = frozenset({"lys-n", "asp-n"})

_AMBIGUOUS = re.compile(r"[BJXZ]")
log = logging.getLogger(__name__)


@dataclass(slots=True)
class PeptideOrigin:
    """Where a peptide sequence comes from."""

    sequence: str = ""
    proteins: list[int] = field(default_factory=list)
    protein_n_term: bool = False
    protein_c_term: bool = False
    missed_cleavages: int = 0


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


PARALLEL_FROM = 4000  # proteins: fewer are digested in this process (starting workers costs ~0.5 s)
CHUNKS_PER_WORKER = 4  # pieces per worker process, for balance
# with fewer cores the pieces' pickling and merging cost more than they save: on 2 cores 13,538 proteins took
# 5.7 s in 2 processes against 4.1 s in one (development machine)
PARALLEL_CORES = 4


def digest(
    proteins: Sequence[Protein],
    cfg: DatabaseConfig,
    *,
    progress: Callable[[int], None] | None = None,
    workers: int | None = None,
) -> dict[str, PeptideOrigin]:
    """Digest proteins into unique peptides within the length bounds.

    Peptides containing an ambiguous residue (B, J, X, Z) are not returned.
    With ``isoleucine_equals_leucine`` the keys have every I written as L, so
    peptides differing only by I/L are stored once.

    Large databases are cut into pieces digested by ``workers`` processes (default: one a CPU core, at most
    16, on machines of `PARALLEL_CORES` or more); the pieces are merged in protein order, so the result, its
    order included, is the one process's.

    Parameters
    ----------
    proteins
        Proteins in index order; ``PeptideOrigin.proteins`` holds their positions.
    cfg
        Enzyme, specificity, missed cleavages, length bounds, Met clipping.
    progress
        Called with the number of proteins digested since the last call.
    workers
        Processes to digest in (1: this one).
    """
    n = len(proteins)
    cores = os.cpu_count() or 1
    workers = (min(cores, 16) if cores >= PARALLEL_CORES else 1) if workers is None else workers
    if workers <= 1 or n < PARALLEL_FROM:
        return _digest(proteins, cfg, 0, progress)
    step = -(-n // (workers * CHUNKS_PER_WORKER))
    starts = list(range(0, n, step))
    peptides: dict[str, PeptideOrigin] = {}
    ctx = multiprocessing.get_context("spawn")  # no fork: the caller may hold threads and a GPU context
    done = 0
    try:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            parts = pool.map(_digest_rows, [(list(proteins[a : a + step]), cfg, a) for a in starts])
            for a, rows in zip(starts, parts, strict=True):
                _merge(peptides, rows)
                done = a + len(proteins[a : a + step])
                if progress is not None:
                    progress(done - a)
    except concurrent.futures.process.BrokenProcessPool:  # workers could not start (e.g. a __main__ from stdin)
        log.warning("digesting in worker processes failed: digesting the rest in this one")
        rest = _digest(proteins[done:], cfg, done, progress)
        _merge(peptides, [(k, o.sequence, o.proteins, o.protein_n_term, o.protein_c_term, o.missed_cleavages)
                          for k, o in rest.items()])  # fmt: skip
    return peptides


_Row = tuple[str, str, list[int], bool, bool, int]  # key, sequence, proteins, protein N-term, C-term, missed


def _digest_rows(job: tuple[list[Protein], DatabaseConfig, int]) -> list[_Row]:
    """A worker's piece, as plain tuples (they pickle several times faster than the dataclasses)."""
    proteins, cfg, first = job
    return [(key, o.sequence, o.proteins, o.protein_n_term, o.protein_c_term, o.missed_cleavages)
            for key, o in _digest(proteins, cfg, first, None).items()]  # fmt: skip


def _merge(peptides: dict[str, PeptideOrigin], rows: list[_Row]) -> None:
    """Add a later piece's peptides: new ones in its order, known ones gain its proteins (later in order)."""
    for key, seq, prots, n_term, c_term, missed in rows:
        origin = peptides.get(key)
        if origin is None:
            peptides[key] = PeptideOrigin(seq, prots, n_term, c_term, missed)
        else:
            origin.proteins.extend(prots)
            origin.protein_n_term |= n_term
            origin.protein_c_term |= c_term
            origin.missed_cleavages = min(origin.missed_cleavages, missed)


def _digest(
    proteins: Sequence[Protein], cfg: DatabaseConfig, first: int, progress: Callable[[int], None] | None
) -> dict[str, PeptideOrigin]:
    """`digest` in this process; ``first``: the position of ``proteins[0]`` in the database."""
    rule = re.compile(CLEAVAGE_RULES[cfg.enzyme])
    lo, hi = cfg.min_length, cfg.max_length
    peptides: dict[str, PeptideOrigin] = {}
    il = cfg.isoleucine_equals_leucine
    for p_idx, prot in enumerate(proteins, first):
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
        if progress is not None and ((p_idx - first) & 255) == 255:
            progress(256)
    if progress is not None:
        progress(len(proteins) & 255)
    return peptides


def decoy_sequence(seq: str, enzyme: Enzyme) -> str:
    """Reverse a peptide, keeping the residue the enzyme cut next to in place.

    ``PEPTIDEK`` → ``EDITPEPK`` (trypsin); ``DPEPTIDE`` → ``DEDITPEP`` (Asp-N).
    """
    if len(seq) < 2:
        return seq
    if enzyme in CUTS_BEFORE:
        return seq[0] + seq[:0:-1]
    return seq[-2::-1] + seq[-1]
