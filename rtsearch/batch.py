"""`SpectraBatch`: spectra column by column, what scoring takes.

The daemon receives spectra as columns (`rtsearch.serve.intake.chunks.SpectraChunk`) and scoring works
on arrays, so a batch between them is columns too: header fields as arrays, peaks concatenated
(spectrum ``i``'s are ``offsets[i]:offsets[i + 1]``, ascending m/z). A file's `Spectrum` objects
become one with `SpectraBatch.of`; code that works spectrum by spectrum gets them back with
`spectra`. A leaf module (NumPy and `rtsearch.types`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rtsearch.types import Spectrum, spectrum_ids


@dataclass
class SpectraBatch:
    """S MS2 spectra, column by column (see the module docstring)."""

    run: list[str]
    scan: np.ndarray  # int64 [S]
    precursor_mz: np.ndarray  # float64 [S]
    rt: np.ndarray  # float64 [S], seconds
    charges: list[tuple[int, ...]]  # [S]: the charges to try, () unknown
    problem: list[str]  # [S]: why a spectrum cannot be scored, "" when it can
    mz: np.ndarray  # float64 [total]
    intensity: np.ndarray  # float32 [total]
    offsets: np.ndarray  # int64 [S + 1]
    native_id: list[str] = field(default_factory=list)  # [S] as the file names each (`Spectrum.native_id`); [] none

    def ids(self) -> list[str]:
        """Each spectrum's native id, ``scan=N`` where none came (the wire's spectra)."""
        return spectrum_ids(self.native_id, self.scan)

    def __len__(self) -> int:
        return int(self.scan.shape[0])

    @property
    def lengths(self) -> np.ndarray:
        """Peaks of each spectrum."""
        return np.diff(self.offsets)

    @classmethod
    def of(cls, spectra: Sequence[Spectrum]) -> SpectraBatch:
        """``spectra`` as columns."""
        s = len(spectra)
        offsets = np.zeros(s + 1, dtype=np.int64)
        np.cumsum(np.fromiter((sp.mz.shape[0] for sp in spectra), dtype=np.int64, count=s), out=offsets[1:])
        return cls(
            run=[sp.run for sp in spectra], scan=np.fromiter((sp.scan for sp in spectra), np.int64, count=s),
            precursor_mz=np.fromiter((sp.precursor_mz for sp in spectra), np.float64, count=s),
            rt=np.fromiter((sp.rt for sp in spectra), np.float64, count=s),
            charges=[sp.charges for sp in spectra], problem=[sp.problem for sp in spectra],
            mz=np.concatenate([sp.mz for sp in spectra]).astype(np.float64, copy=False) if s else np.zeros(0),
            intensity=np.concatenate([sp.intensity for sp in spectra]).astype(np.float32, copy=False) if s
            else np.zeros(0, np.float32), offsets=offsets,
            native_id=[sp.native_id for sp in spectra] if any(sp.native_id for sp in spectra) else [],
        )  # fmt: skip

    def spectra(self) -> list[Spectrum]:
        """Each spectrum as a `Spectrum` (its peaks are views into this batch's arrays)."""
        o = self.offsets.tolist()
        return [
            Spectrum(run, scan, 2, self.mz[o[i] : o[i + 1]], self.intensity[o[i] : o[i + 1]], prec, z, rt, 0.0, p,
                     self.native_id[i] if self.native_id else "")
            for i, (run, scan, prec, rt, z, p) in enumerate(zip(
                self.run, self.scan.tolist(), self.precursor_mz.tolist(), self.rt.tolist(), self.charges,
                self.problem, strict=True,
            ))
        ]  # fmt: skip

    def take(self, rows: Sequence[int] | np.ndarray) -> SpectraBatch:
        """The spectra at ``rows``, in that order."""
        idx = np.asarray(rows, dtype=np.int64)
        lo, hi = self.offsets[idx], self.offsets[idx + 1]
        n = hi - lo
        offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(n, out=offsets[1:])
        if len(idx) > 1 and bool((idx[1:] > idx[:-1]).all()):
            # rows ascending (the usual: a part of a chunk): a mask over the peaks, not an index a peak
            # (5.6x faster for 3,000 of 4,096 spectra, docs/history/RESULTS.md)
            keep = np.zeros(len(self), dtype=bool)
            keep[idx] = True
            peaks: np.ndarray = np.repeat(keep, np.diff(self.offsets))
        else:
            peaks = np.repeat(lo - offsets[:-1], n) + np.arange(int(offsets[-1]))  # each kept peak's old position
        rows_ = idx.tolist()
        return SpectraBatch([self.run[i] for i in rows_], self.scan[idx], self.precursor_mz[idx], self.rt[idx],
                            [self.charges[i] for i in rows_], [self.problem[i] for i in rows_], self.mz[peaks],
                            self.intensity[peaks], offsets,
                            [self.native_id[i] for i in rows_] if self.native_id else [])  # fmt: skip

    @classmethod
    def concat(cls, parts: Sequence[SpectraBatch]) -> SpectraBatch:
        """One batch holding ``parts`` in order."""
        ends = np.array([p.offsets[-1] for p in parts], dtype=np.int64)  # each part's peaks
        starts = np.cumsum(ends) - ends  # where each part's peaks start in the whole
        counts = [len(p.offsets) - 1 for p in parts]
        raw = np.concatenate([p.offsets[1:] for p in parts]) if parts else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], raw + np.repeat(starts, counts)])
        return cls(
            [r for p in parts for r in p.run], np.concatenate([p.scan for p in parts]),
            np.concatenate([p.precursor_mz for p in parts]), np.concatenate([p.rt for p in parts]),
            [z for p in parts for z in p.charges], [x for p in parts for x in p.problem],
            np.concatenate([p.mz for p in parts]), np.concatenate([p.intensity for p in parts]),
            offsets.astype(np.int64),
            [n for p in parts for n in p.ids()] if any(p.native_id for p in parts) else [],
        )  # fmt: skip
