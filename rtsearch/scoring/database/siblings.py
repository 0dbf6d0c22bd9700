"""Sibling evidence: how many other likely matches of the run fall on a PSM's protein, fitted per run.

A protein in the sample gives many spectra, of several of its peptides and of the same peptide more than once;
a random match falls on any of the database's proteins and rarely meets another. ProteinProphet's "number of
sibling peptides" (Nesvizhskii, Keller, Kolker & Aebersold 2003, Anal. Chem. 75:4646) and iProphet's NSP and
NRS models (Shteynberg et al. 2011, Mol. Cell. Proteomics 10:M111.007690) carry this evidence back to the
peptide; here it is one more feature of the run's discriminant (`rtsearch.search.database`):

    siblings = log(1 + max over the PSM's proteins of the other counted PSMs on that protein)

Counted are the run's first-rank PSMs that a first fit accepts at 1 % FDR, **targets and decoys alike** (a
decoy protein holds decoy PSMs only): the feature is worked out the same way whatever a PSM's label, so a
random target and a decoy have the same chance of siblings, which target-decoy competition needs. On the four
dev runs with a 1:1 entrapment it took BSA1 from 7 to 58 accepted PSMs (one decoy among its best had cut the run
off), and with the discriminant's stronger shrinkage (`rtsearch.search.database.RIDGE`) the four from 231
accepted / 3 entrapment matches to 273 / 0 (docs/history/RESULTS.md, 2026-11-28).
"""

from __future__ import annotations

import numpy as np

from rtsearch.database.index import PeptideIndex


def sibling_evidence(index: PeptideIndex, peptides: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """``log1p`` of the most other ``counted`` PSMs on any one protein of each PSM.

    Parameters
    ----------
    peptides
        Peptide index of each PSM (>= 0).
    counted
        Mask of the PSMs that count as siblings (a PSM is never its own).
    """
    n = peptides.shape[0]
    if n == 0:
        return np.zeros(0)
    counted = np.asarray(counted, dtype=bool)
    keys, bounds = index.protein_keys(peptides)  # every peptide has a protein
    lengths: np.ndarray = np.diff(np.asarray(bounds, dtype=np.int64))
    owner = np.repeat(np.arange(n), lengths)
    # each counted PSM once on each of its proteins (a protein listed twice for a peptide counts once); one int64
    # sort: the whole feature 35 ms for 50,000 PSMs on the development machine, 46 with a 2-D np.unique
    mine = counted[owner]
    per_protein = np.bincount(np.unique(keys[mine] * n + owner[mine]) // n, minlength=int(keys.max()) + 1)
    best = np.zeros(n, dtype=np.int64)
    np.maximum.at(best, owner, per_protein[keys])
    return np.log1p(best - counted)
