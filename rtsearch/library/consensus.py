"""A consensus spectral library from a lab's own identifications (``rtsearch library build``).

From a results file (``rtsearch search`` or a daemon run file) the targets at
``q_value <= max_q`` are taken, their spectra read from the runs, and the
replicates of each (peptide, charge) merged SpectraST-style (Lam et al. 2008,
Nat. Methods 5:873, consensus spectra): each replicate scaled to its most
intense peak, peaks of all replicates within ``peak_tolerance`` Th clustered,
a cluster kept when present in at least ``quorum`` of the replicates (every
cluster with one or two replicates), its m/z the intensity-weighted mean and its
intensity the mean over all replicates; the ``top_peaks`` most intense kept.
Written as NIST MSP that `rtsearch.library.files` reads back (``Mods=`` with
Unimod names, ``Parent=`` the theoretical m/z, ``Nreps=``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rtsearch.errors import InputError
from rtsearch.io.results import read_results
from rtsearch.io.spectra import read_spectra
from rtsearch.library.files import MODS, peptide_mz

_TOKEN = re.compile(r"([A-Z])((?:\[[^\]]+\])*)")
_NEEDED = ("run", "scan", "peptide", "charge", "proteins", "is_decoy", "q_value")
_NTERM = re.compile(r"^((?:\[[^\]]+\])+)-")


@dataclass
class BuildReport:
    identified: int = 0  # target rows at q <= max_q
    found: int = 0  # of those, spectra found in the runs
    entries: int = 0
    skipped: list[str] | None = None  # peptides not writable (modification without a Unimod name)


def parse_proforma(peptide: str) -> tuple[str, list[tuple[int, str]]]:
    """``[Acetyl]-AC[Carbamidomethyl]K`` → ``("ACK", [(-1, "Acetyl"), (1, "Carbamidomethyl")])``."""
    mods: list[tuple[int, str]] = []
    rest = peptide
    m = _NTERM.match(rest)
    if m:
        mods += [(-1, name) for name in re.findall(r"\[([^\]]+)\]", m.group(1))]
        rest = rest[m.end() :]
    seq: list[str] = []
    for t in _TOKEN.finditer(rest):
        mods += [(len(seq), name) for name in re.findall(r"\[([^\]]+)\]", t.group(2))]
        seq.append(t.group(1))
    if "".join(t.group(0) for t in _TOKEN.finditer(rest)) != rest:
        raise ValueError(f"not a ProForma peptide rtsearch writes: {peptide!r}")
    return "".join(seq), mods


def consensus(
    spectra: list[tuple[np.ndarray, np.ndarray]], *, peak_tolerance: float, quorum: float, top_peaks: int
) -> tuple[np.ndarray, np.ndarray]:
    """The consensus of replicate spectra (see the module docstring): ``(mz, intensity)``."""
    n = len(spectra)
    mz = np.concatenate([s[0] for s in spectra])
    inten = np.concatenate([s[1] / max(float(s[1].max()), 1e-12) if s[1].size else s[1] for s in spectra])
    rep = np.concatenate([np.full(s[0].size, k) for k, s in enumerate(spectra)])
    order = np.argsort(mz, kind="stable")
    mz, inten, rep = mz[order], inten[order], rep[order]
    if not mz.size:
        return mz, inten
    cluster = np.r_[0, np.cumsum(np.diff(mz) > peak_tolerance)]
    k = int(cluster[-1]) + 1
    weight = np.bincount(cluster, weights=inten, minlength=k)
    c_mz = np.bincount(cluster, weights=mz * inten, minlength=k) / np.maximum(weight, 1e-12)
    present = np.zeros((k, n), dtype=bool)
    present[cluster, rep] = True
    keep = present.sum(axis=1) >= (quorum * n if n > 2 else 1)
    c_int = weight / n
    c_mz, c_int = c_mz[keep], c_int[keep]
    if c_mz.size > top_peaks:
        top = np.sort(np.argsort(-c_int, kind="stable")[:top_peaks])
        c_mz, c_int = c_mz[top], c_int[top]
    return c_mz, c_int


def build_library(
    results: str | Path, runs: Iterable[str | Path], out: str | Path, *, max_q: float = 0.01,
    peak_tolerance: float = 0.02, quorum: float = 0.6, top_peaks: int = 150,
) -> BuildReport:  # fmt: skip
    """Write the consensus MSP library of ``results``' identifications in ``runs`` to ``out``."""
    report = BuildReport(skipped=[])
    wanted: dict[tuple[str, int], tuple[str, int, str]] = {}
    cols = read_results(results, _NEEDED)
    for run, scan, peptide, charge, prot, decoy, q in zip(*(cols[c] for c in _NEEDED), strict=True):
        if peptide and decoy is False and q is not None and q <= max_q:
            wanted[(run, int(scan))] = (peptide, int(charge), prot or "")
    report.identified = len(wanted)
    groups: dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    proteins: dict[tuple[str, int], str] = {}
    for run in runs:
        for sp in read_spectra(run):
            hit = wanted.get((sp.run, sp.scan))
            if hit is None:
                continue
            peptide, charge, prot = hit
            groups[(peptide, charge)].append((np.asarray(sp.mz, np.float64), np.asarray(sp.intensity, np.float64)))
            proteins[(peptide, charge)] = prot
            report.found += 1
    lines: list[str] = []
    for (peptide, charge), reps in sorted(groups.items()):
        seq, mods = parse_proforma(peptide)
        if any(name not in MODS for _, name in mods):
            report.skipped.append(peptide)  # type: ignore[union-attr]
            continue
        deltas = tuple((p, MODS[name], name) for p, name in mods)
        mz, inten = consensus(reps, peak_tolerance=peak_tolerance, quorum=quorum, top_peaks=top_peaks)
        if not mz.size:
            continue
        prec = peptide_mz(seq, deltas, charge)
        listed = "".join(f"/{max(p, 0)},{seq[max(p, 0)]},{name}" for p, name in mods)
        lines += [f"Name: {seq}/{charge}", f"MW: {prec * charge:.4f}",
                  f"Comment: Spec=Consensus Parent={prec:.4f} Mods={len(mods)}{listed} Nreps={len(reps)} "
                  f'Protein="{proteins[(peptide, charge)]}"',
                  f"Num peaks: {mz.size}", *(f"{a:.4f}\t{b * 10000:.1f}" for a, b in zip(mz, inten, strict=True)),
                  ""]  # fmt: skip
        report.entries += 1
    if not report.entries:
        raise InputError(f"{results}: no identification at q <= {max_q:g} found in the given runs (q = (decoys + 1)"
                         " / targets: a run with under 100 confident matches has none at 0.01; --max-q 0.05 takes "
                         "those at 5 %)")  # fmt: skip
    Path(out).write_text("\n".join(lines))
    return report
