"""Spectral libraries: SpectraST-style preprocessing, shuffled decoys, and the binary store.

Import (`import_library`) reads MSP / sptxt entries (`rtsearch.library.files`),
adds one decoy per target, preprocesses every spectrum once and writes a folder
that `load_library` memory-maps, sorted by precursor m/z so the entries within a
query's precursor tolerance are one contiguous range::

    precursor_mz  float64 [E]      ascending          charge   int8 [E]
    is_decoy      bool    [E]                         peptides.json  ProForma [E]
    peak_offsets  int64   [E + 1]  entry e's peaks are peak_bins/peak_values[off[e]:off[e+1]]
    peak_bins     int32   [P]      m/z bin (floor(m/z / bin_width)), ascending within an entry
    peak_values   float32 [P]      sqrt intensity, unit L2 norm per entry

Preprocessing (Lam et al. 2007, SpectraST, Proteomics 7:655): peaks within
``precursor_removal_da`` of the precursor m/z removed, the ``top_peaks`` most
intense kept, square-root intensities, binned at ``bin_width`` Th (peaks in one
bin summed), normalized to unit length, so a dot product of two entries is
SpectraST's (cosine) dot.

Decoys: shuffle-and-reposition (Lam et al. 2010, J. Proteome Res. 9:605): the
residues but the C-terminal one are shuffled (seeded per entry, modifications
move with their residues), and every peak within ``reposition_tol_da`` of a b or
y ion of the target (charge 1 or 2) moves to the same ion of the shuffled
sequence; other peaks stay. Same precursor, same peak count and intensities.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch import __version__
from rtsearch.database.mods import RESIDUE_MASS
from rtsearch.errors import InputError
from rtsearch.library.files import LibraryEntry, Malformed, proforma
from rtsearch.library.formats import read_entries
from rtsearch.types import H2O, PROTON

STORE_VERSION = 1
_ARRAYS = ("precursor_mz", "charge", "is_decoy", "peak_offsets", "peak_bins", "peak_values")


@dataclass(frozen=True)
class LibraryParams:
    """How library spectra are preprocessed (stored in the manifest; queries must match)."""

    bin_width: float = 1.0005
    top_peaks: int = 150
    precursor_removal_da: float = 2.0
    decoys: bool = True
    reposition_tol_da: float = 0.5
    seed: int = 1

    def __post_init__(self) -> None:
        if not (self.bin_width > 0 and self.top_peaks >= 1 and self.precursor_removal_da >= 0
                and self.reposition_tol_da > 0):  # fmt: skip
            raise ValueError("need bin_width > 0, top_peaks >= 1, precursor_removal_da >= 0, reposition_tol_da > 0")


def preprocess_peaks(
    mz: np.ndarray, intensity: np.ndarray, precursor_mz: float, params: LibraryParams
) -> tuple[np.ndarray, np.ndarray]:
    """Binned, square-rooted, unit-norm peaks of one spectrum: ``(bins int32 ascending, values float32)``."""
    mz = np.asarray(mz, dtype=np.float64)
    inten = np.asarray(intensity, dtype=np.float64)
    keep = (np.abs(mz - precursor_mz) > params.precursor_removal_da) & (inten > 0)
    mz, inten = mz[keep], inten[keep]
    if mz.size > params.top_peaks:
        top = np.argsort(-inten, kind="stable")[: params.top_peaks]
        mz, inten = mz[top], inten[top]
    bins = np.floor(mz / params.bin_width).astype(np.int64)
    uniq, inv = np.unique(bins, return_inverse=True)
    values: np.ndarray = np.bincount(inv, weights=np.sqrt(inten), minlength=uniq.size).astype(np.float64)
    norm = float(np.sqrt((values**2).sum()))
    if norm > 0:
        values = values / norm
    return uniq.astype(np.int32), values.astype(np.float32)


def _fragments(sequence: str, mods: Sequence[tuple[int, float, str]], charge: int) -> np.ndarray:
    """m/z of b and y ions, shape [2 (b, y), n - 1, max(1, min(charge, 2))]; ion i has i + 1 residues."""
    res = np.array([RESIDUE_MASS[a] for a in sequence], dtype=np.float64)
    for pos, delta, _ in mods:
        if pos >= 0:
            res[pos] += delta
    n_term = sum(d for p, d, _ in mods if p < 0)
    b = np.cumsum(res)[:-1] + n_term
    y = np.cumsum(res[::-1])[:-1] + H2O
    zs = np.arange(1, max(1, min(charge, 2)) + 1)
    ions = np.stack([b, y])[:, :, None]
    return (ions + zs * PROTON) / zs


def decoy_entry(entry: LibraryEntry, params: LibraryParams) -> LibraryEntry | None:
    """The shuffle-and-reposition decoy of ``entry`` (``None``: too short to differ)."""
    seq = entry.sequence
    if len(seq) < 3:
        return None
    rng = np.random.default_rng([params.seed, entry.number])
    head = np.arange(len(seq) - 1)
    for _ in range(20):
        perm = np.r_[rng.permutation(head), len(seq) - 1]
        shuffled = "".join(seq[i] for i in perm)
        if shuffled != seq:
            break
    else:
        return None
    new_pos = np.empty(len(seq), dtype=np.int64)
    new_pos[perm] = np.arange(len(seq))
    mods = tuple(sorted((int(new_pos[p]) if p >= 0 else p, d, label) for p, d, label in entry.mods))
    old, new = _fragments(seq, entry.mods, entry.charge), _fragments(shuffled, mods, entry.charge)
    flat_old, flat_new = old.ravel(), new.ravel()
    order = np.argsort(flat_old)
    ions = flat_old[order]
    mz = entry.mz.copy()
    j = np.clip(np.searchsorted(ions, mz), 1, ions.size - 1)
    nearest = np.where(np.abs(ions[j - 1] - mz) <= np.abs(ions[j] - mz), j - 1, j)
    hit = np.abs(ions[nearest] - mz) <= params.reposition_tol_da
    mz[hit] += flat_new[order][nearest[hit]] - ions[nearest[hit]]
    o = np.argsort(mz, kind="stable")
    return LibraryEntry(entry.number, proforma(shuffled, mods), shuffled, mods, entry.charge, entry.precursor_mz,
                        mz[o], entry.intensity[o], f"DECOY_{entry.protein}" if entry.protein else "DECOY")  # fmt: skip


@dataclass
class ImportReport:
    """What an import read, kept and refused."""

    files: list[str] = field(default_factory=list)
    read: int = 0
    targets: int = 0
    decoys: int = 0
    malformed: list[tuple[str, Malformed]] = field(default_factory=list)


def import_library(
    paths: Iterable[str | Path], out: str | Path, params: LibraryParams = LibraryParams(),
    *, progress: Callable[[int], None] | None = None,
) -> ImportReport:  # fmt: skip
    """Read, preprocess, add decoys and write the store to ``out`` (replaced atomically); the report."""
    report = ImportReport()
    precursor: list[float] = []
    charge: list[int] = []
    decoy: list[bool] = []
    peptides: list[str] = []
    proteins: list[str] = []
    bins: list[np.ndarray] = []
    values: list[np.ndarray] = []

    def add(e: LibraryEntry, is_decoy: bool) -> None:
        b, v = preprocess_peaks(e.mz, e.intensity, e.precursor_mz, params)
        precursor.append(e.precursor_mz)
        charge.append(e.charge)
        decoy.append(is_decoy)
        peptides.append(e.peptide)
        proteins.append(e.protein)
        bins.append(b)
        values.append(v)

    for path in paths:
        report.files.append(str(path))
        for item in read_entries(path):
            report.read += 1
            if progress is not None:
                progress(report.read)
            if isinstance(item, Malformed):
                report.malformed.append((str(path), item))
                continue
            add(item, False)
            report.targets += 1
            if params.decoys and (d := decoy_entry(item, params)) is not None:
                add(d, True)
                report.decoys += 1
    if not peptides:
        why = "".join(f"\n  {f}: entry {b.number} ({b.name[:60]}): {b.reason}" for f, b in report.malformed)
        raise InputError(f"no usable library entry in {', '.join(report.files)} ({report.read} read)" + (
            f"; each with its reason:{why}" if why else ": no entry found (MSP, sptxt, .dlib or .elib?)"))
    order = np.argsort(np.asarray(precursor), kind="stable")
    counts = np.array([len(bins[i]) for i in order], dtype=np.int64)
    arrays = {
        "precursor_mz": np.asarray(precursor, dtype=np.float64)[order],
        "charge": np.asarray(charge, dtype=np.int8)[order],
        "is_decoy": np.asarray(decoy, dtype=bool)[order],
        "peak_offsets": np.r_[0, np.cumsum(counts)].astype(np.int64),
        "peak_bins": np.concatenate([bins[i] for i in order]).astype(np.int32),
        "peak_values": np.concatenate([values[i] for i in order]).astype(np.float32),
    }
    manifest = {
        "format": "rtsearch-spectral-library", "version": STORE_VERSION, "rtsearch": __version__,
        "params": params.__dict__, "sources": report.files,
        "counts": {"entries": len(peptides), "targets": report.targets, "decoys": report.decoys,
                   "malformed": len(report.malformed), "peaks": int(counts.sum())},
    }  # fmt: skip
    write_store(Path(out), arrays, manifest, [peptides[i] for i in order], [proteins[i] for i in order])
    return report


def write_store(out: Path, arrays: dict[str, np.ndarray], manifest: dict[str, Any], peptides: list[str],
                proteins: list[str]) -> None:  # fmt: skip
    """Write a store folder (the module docstring's arrays, sorted by precursor m/z), replacing ``out``."""
    if out.exists() and not (out / "manifest.json").is_file():
        raise InputError(f"{out}: exists and is not a spectral library folder; choose another --out")
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, a in arrays.items():
        np.save(tmp / f"{name}.npy", a)
    (tmp / "peptides.json").write_text(json.dumps(peptides))
    (tmp / "proteins.json").write_text(json.dumps(proteins))
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


_MODIFICATION = re.compile(r"\[[^\]]*\]-?")  # a ProForma modification, with its N-terminal dash


def sequence_ids(peptides: Sequence[str]) -> np.ndarray:
    """One int32 id per distinct unmodified sequence, in order of first appearance.

    Delta dot compares the best entry with the best of another sequence, as SpectraST does:
    another charge or modification of the same sequence is not "another peptide".
    """
    ids: dict[str, int] = {}
    return np.fromiter((ids.setdefault(_MODIFICATION.sub("", p), len(ids)) for p in peptides), dtype=np.int32,
                       count=len(peptides))  # fmt: skip


@dataclass(frozen=True)
class SpectralLibrary:
    """A loaded store (arrays memory-mapped); see the module docstring for the layout."""

    params: LibraryParams
    precursor_mz: np.ndarray
    charge: np.ndarray
    decoy: np.ndarray  # bool [E] (stored as is_decoy.npy)
    peak_offsets: np.ndarray
    peak_bins: np.ndarray
    peak_values: np.ndarray
    peptides: list[str]
    proteins: list[str]
    manifest: dict[str, Any]
    folder: Path | None = None  # where it was loaded from

    def __len__(self) -> int:
        return int(self.precursor_mz.shape[0])

    @functools.cached_property
    def sequence(self) -> np.ndarray:
        """int32 [E]: each entry's unmodified-sequence id (`sequence_ids`), computed once."""
        return sequence_ids(self.peptides)

    def is_decoy(self, i: int | np.ndarray) -> Any:
        """Whether entry ``i`` (or each of an array of them) is a decoy."""
        return self.decoy[i]

    def proformas(self, ids: np.ndarray) -> list[str]:
        """Each entry's peptide (ProForma), as a match's name in results."""
        return [self.peptides[i] for i in np.asarray(ids, dtype=np.int64).tolist()]

    def accessions(self, ids: np.ndarray) -> list[list[str]]:
        """Each entry's proteins (the library's ``Protein`` field, split at ``;``)."""
        return [[a for a in self.proteins[i].split(";") if a] for i in np.asarray(ids, dtype=np.int64).tolist()]

    def peaks(self, e: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = int(self.peak_offsets[e]), int(self.peak_offsets[e + 1])
        return self.peak_bins[lo:hi], self.peak_values[lo:hi]

    def within(self, lo_mz: float, hi_mz: float) -> range:
        """Entries with precursor m/z in ``[lo_mz, hi_mz]``."""
        a = int(np.searchsorted(self.precursor_mz, lo_mz, "left"))
        return range(a, int(np.searchsorted(self.precursor_mz, hi_mz, "right")))


def load_library(folder: str | Path) -> SpectralLibrary:
    """Memory-map a store written by `import_library`."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{folder}: not a spectral library folder ({e})") from None
    if manifest.get("format") != "rtsearch-spectral-library" or manifest.get("version") != STORE_VERSION:
        raise InputError(f"{folder}: not a version-{STORE_VERSION} rtsearch spectral library")
    try:
        arrays = {n: np.load(folder / f"{n}.npy", mmap_mode="r").view(np.ndarray) for n in _ARRAYS}
        peptides = json.loads((folder / "peptides.json").read_text())
        proteins = json.loads((folder / "proteins.json").read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{folder}: missing or damaged library file: {e}") from None
    arrays["decoy"] = arrays.pop("is_decoy")
    return SpectralLibrary(LibraryParams(**manifest["params"]), peptides=peptides, proteins=proteins,
                           manifest=manifest, folder=folder, **arrays)  # fmt: skip
