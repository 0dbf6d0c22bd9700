"""What a spectrum costs its partition worker, learnt from the parts the workers answered.

`rtsearch.cluster.partition.LiveCuts` cuts the mass range into pieces of equal work; the work of a spectrum was the
candidates its precursor windows meet. A worker's time is not that alone: each spectrum also costs a share that does
not grow with its candidates (its peaks preprocessed, its best match chosen and named), so the piece of the many
light spectra was the busier one (2× H200, 200 Da windows, two lanes of two pieces: its workers 0.97 busy, the
other piece's 0.84; docs/history/RESULTS.md, 2026-11-27). Here each part a worker answered — ``n`` spectra meeting
``candidates`` in all, ``seconds`` of its own time — fits

    seconds = c + a · n + b · candidates        (c: the part's own cost, whatever its spectra)

by exponentially weighted least squares, and `SpectrumCost.work` gives each spectrum ``a + b · candidates`` in the
units of candidates (scaled so that a spectrum of the mean candidates weighs what it did), which the cuts then
balance. Until enough parts were seen, or where the fit says nothing (a or b below 0), the work stays the
candidates. Pure NumPy: no I/O. Written here (a 3 × 3 system, decayed sums updated a part at a time, as
`rtsearch.serve.engine.batching.EngineTimeModel` does for batches) rather than refitting a regression over the parts
kept: `observe` and its fit 24 µs a part against 51 µs for `numpy.linalg.lstsq` over 2,000 kept parts (development
machine, 2026-11-27), with no window of parts to keep.
"""

from __future__ import annotations

import numpy as np

MIN_PARTS = 64  # parts fitted before the model is used (two pieces: a few batches each way)
RIDGE = 1e-9  # relative: keeps the normal equations solvable when the parts are alike


class SpectrumCost:
    """``observe`` each answered part; ``work`` weighs spectra by what they cost (see the module docstring)."""

    def __init__(self, *, halflife: float = 2000.0) -> None:
        self._decay = 0.5 ** (1.0 / halflife)
        self._xx = np.zeros((3, 3))
        self._xy = np.zeros(3)
        self._parts = 0
        self._mean_candidates = 0.0
        self.per_spectrum = self.per_candidate = 0.0  # a and b of the fit in use (0, 0: not fitted)

    def observe(self, n: int, candidates: float, seconds: float) -> None:
        """A part of ``n`` spectra meeting ``candidates`` in all took its worker ``seconds``."""
        if n <= 0 or not np.isfinite(seconds) or seconds <= 0 or not np.isfinite(candidates) or candidates < 0:
            return
        x = np.array([1.0, float(n), float(candidates)])
        d = self._decay
        self._xx = self._xx * d + np.outer(x, x)
        self._xy = self._xy * d + x * seconds
        self._parts += 1
        mean = candidates / n
        self._mean_candidates = mean if self._parts == 1 else d * self._mean_candidates + (1 - d) * mean
        if self._parts >= MIN_PARTS:
            self._fit()

    def _fit(self) -> None:
        scale = np.sqrt(np.maximum(np.diag(self._xx), 1e-300))  # columns of very different sizes: solved scaled
        xx = self._xx / np.outer(scale, scale) + RIDGE * np.eye(3)
        try:
            c, a, b = np.linalg.solve(xx, self._xy / scale) / scale
        except np.linalg.LinAlgError:
            return
        if a >= 0 and b >= 0 and a + b > 0 and np.isfinite([c, a, b]).all():
            self.per_spectrum, self.per_candidate = float(a), float(b)

    def work(self, candidates: np.ndarray) -> np.ndarray:
        """Each spectrum's work from its ``candidates``: the fitted cost in candidates' units (a spectrum of the
        mean candidates seen weighs its candidates), or the candidates themselves before a fit."""
        c = np.asarray(candidates, np.float64)
        a, b, mean = self.per_spectrum, self.per_candidate, self._mean_candidates
        if a + b <= 0 or mean <= 0:
            return c
        return mean * (a + b * c) / (a + b * mean)
