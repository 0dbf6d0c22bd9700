"""`SpectraBatch`: columns that give back the spectra they were made of, taken and joined without loss."""

from __future__ import annotations

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, bundled
from rtsearch.io.spectra import read_spectra
from rtsearch.spectrum import pack


def _same(a, b) -> None:
    assert (a.run, a.scan, a.precursor_mz, a.rt, a.charges, a.problem) == (b.run, b.scan, b.precursor_mz, b.rt,
                                                                            b.charges, b.problem)  # fmt: skip
    np.testing.assert_array_equal(a.mz, b.mz)
    np.testing.assert_array_equal(a.intensity, b.intensity)


def test_columns_round_trip_take_and_concat() -> None:
    spectra = list(read_spectra(bundled(RUN)))
    batch = SpectraBatch.of(spectra)
    assert len(batch) == 139 and batch.offsets[-1] == sum(s.n_peaks for s in spectra)
    for a, b in zip(batch.spectra(), spectra, strict=True):
        _same(a, b)
    for rows in ([5, 0, 138, 5], [1, 7, 8, 100, 138], [3]):  # any order and repeats; ascending (taken by a mask)
        for a, k in zip(batch.take(rows).spectra(), rows, strict=True):
            _same(a, spectra[k])
    joined = SpectraBatch.concat([batch.take(range(0, 50)), batch.take([]), batch.take(range(50, 139))])
    for a, b in zip(joined.spectra(), spectra, strict=True):
        _same(a, b)
    assert len(SpectraBatch.of([])) == 0 and SpectraBatch.of([]).offsets.tolist() == [0]


def test_pack_keeps_the_most_intense_peaks_of_a_wide_spectrum() -> None:
    spectra = list(read_spectra(bundled(RUN)))[:3]
    width = int(min(s.n_peaks for s in spectra)) - 5
    flat = pack(SpectraBatch.of(spectra), max_width=width)
    assert flat.lengths.tolist() == [width] * 3
    at = 0
    for s in spectra:  # each spectrum's kept peaks: its `width` most intense, in m/z order
        keep = np.sort(np.argsort(-s.intensity, kind="stable")[:width])
        np.testing.assert_array_equal(np.sort(flat.intensity[at : at + width]), np.sort(s.intensity[keep]))
        assert (np.diff(flat.mz[at : at + width]) >= 0).all()
        at += width
