"""Library scoring (`rtsearch.scoring.library.scores`): SpectraST's scores, computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.io.spectra import read_spectra
from rtsearch.library.store import LibraryParams, import_library, load_library, sequence_ids
from rtsearch.scoring.library.scores import C13, f_value, library_queries, score_library
from rtsearch.types import Spectrum, Tolerance


@pytest.mark.parametrize(
    ("dot", "delta", "bias", "n", "want"),
    [
        # 0.6 * 0.8 + 0.4 * (0.3 / 0.8) = 0.48 + 0.15; dot bias 0.2 is in the penalty-free band
        (0.8, 0.3, 0.2, 25, 0.63),
        (0.8, 0.3, 0.2, 10, 0.64),  # fewer than 20 candidates: 0.8 * dot
        (0.8, 0.3, 0.05, 25, 0.51),  # dot bias under 0.09: -0.12
        (0.8, 0.3, 0.34, 25, 0.55),  # (0.34 - 0.32) * 4 = 0.08
        (0.8, 0.3, 0.40, 25, 0.45),  # 0.12 + (0.40 - 0.35) * 1.2 = 0.18
        (0.8, 0.3, 0.50, 25, 0.39),  # -0.24
        (0.2, 0.19, 0.2, 25, 0.6 * 0.2 + 0.4 * 0.4),  # delta / dot = 0.95 capped at 2 * dot = 0.4
        (0.0, 0.0, 0.0, 25, -1e-5),
        (0.1, 0.0, 0.50, 25, -1e-5),  # 0.06 - 0.24 <= 0
    ],
)
def test_f_value_golden(dot, delta, bias, n, want):
    assert f_value(np.array([dot]), np.array([delta]), np.array([bias]), np.array([n]))[0] == pytest.approx(want)


def _msp(path, entries):
    lines = []
    for name, peaks in entries:
        lines += [f"Name: {name}", f"Num peaks: {len(peaks)}", *(f"{mz}\t{i}" for mz, i in peaks)]
    path.write_text("\n".join(lines) + "\n")


def test_scores_golden(tmp_path):
    # PEPTIDEK/2: sqrt(36), sqrt(64) at 200 and 300 -> (0.6, 0.8); EPTIDEPK/2 (same precursor): sqrt(64) at 200,
    # sqrt(36) at 400 -> (0.8, 0.6). The query is PEPTIDEK's spectrum: dot 1 with it, 0.6 * 0.8 = 0.48 with the other.
    # dot bias sqrt(0.36^2 + 0.64^2) / 1 = 0.7343; delta 0.52; 2 candidates: F = 0.8 * 1 - 0.24 (bias > 0.45)
    _msp(tmp_path / "l.msp", [("PEPTIDEK/2", [(200.0, 36), (300.0, 64)]), ("EPTIDEPK/2", [(200.0, 64), (400.0, 36)])])
    import_library([tmp_path / "l.msp"], tmp_path / "lib", LibraryParams(decoys=False))
    lib = load_library(tmp_path / "lib")
    prec = float(lib.precursor_mz[0])
    query = Spectrum("r", 1, 2, np.array([200.0, 300.0]), np.array([36.0, 64.0], np.float32), prec, (2,))
    far = Spectrum("r", 2, 2, np.array([200.0]), np.array([1.0], np.float32), prec + 5, (2,))
    other_charge = Spectrum("r", 3, 2, np.array([200.0]), np.array([1.0], np.float32), prec, (3,))
    m = score_library(lib, [query, far, other_charge], Tolerance(20, "ppm"))
    assert lib.peptides[m.entry[0]] == "PEPTIDEK"
    assert m.dot[0] == pytest.approx(1.0, abs=1e-6) and m.delta_dot[0] == pytest.approx(0.52, abs=1e-6)
    assert m.dot_bias[0] == pytest.approx(np.sqrt(0.36**2 + 0.64**2), abs=1e-6)
    assert m.candidates[0] == 2 and m.f_value[0] == pytest.approx(0.56, abs=1e-6)
    assert m.entry[1:].tolist() == [-1, -1] and m.f_value[1:].tolist() == [-1e-5, -1e-5]


def test_isotope_error_candidates(tmp_path):
    _msp(tmp_path / "l.msp", [("PEPTIDEK/2", [(200.0, 36), (300.0, 64)])])
    import_library([tmp_path / "l.msp"], tmp_path / "lib", LibraryParams(decoys=False))
    lib = load_library(tmp_path / "lib")
    # the precursor picked one 13C peak up: 1.0033548 / 2 above the entry's m/z
    prec = float(lib.precursor_mz[0]) + 1.0033548 / 2
    query = Spectrum("r", 1, 2, np.array([200.0, 300.0]), np.array([36.0, 64.0], np.float32), prec, ())
    tol = Tolerance(20, "ppm")
    assert score_library(lib, [query], tol).entry.tolist() == [-1]
    hit = score_library(lib, [query], tol, isotope_errors=(0, 1))
    assert hit.entry.tolist() == [0] and hit.dot[0] == pytest.approx(1.0, abs=1e-6)
    assert score_library(lib, [query], tol, isotope_errors=(-1, 0)).entry.tolist() == [-1]


@pytest.mark.parametrize("window", ["20 ppm", "0.5 Da", "500 Da"])
@pytest.mark.parametrize("isotopes", [(0,), (0, 1), (-1, 0, 1, 2)])
def test_windows_as_arrays_hold_the_reference_candidates(data, tmp_path, isotopes, window):
    """`library_queries` (what the GPU kernels walk) filtered as the kernels filter: the reference's counts."""
    import_library([data / "spectral-libraries/nist-bsa_consensus.msp"], tmp_path / "lib")
    lib = load_library(tmp_path / "lib")
    spectra = list(read_spectra(data / "bsa-orbitrapxl/BSA1.mzML.gz"))  # MS1 among them: empty windows
    if window == "500 Da":
        spectra = spectra[::10]
    spectra += [Spectrum("r", 0, 2, np.array([300.0]), np.array([1.0], np.float32), 600.0, (2, 3, 70))]
    tol = Tolerance.parse(window)
    q = library_queries(lib, spectra, tol, isotopes)
    ref = score_library(lib, spectra, tol, isotope_errors=isotopes)
    assert (q.iso.size == 0) == (isotopes == (0,) and window == "20 ppm") and q.by_mass == window.endswith("Da")
    counts = []
    for s in range(len(spectra)):
        e = np.arange(q.a[s], q.b[s])
        z = lib.charge[e].astype(np.int64)
        if q.zmask[s]:
            keep = ((q.zmask[s] >> np.minimum(z, 63).astype(np.uint64)) & np.uint64(1)) == 1
            e, z = e[keep], z[keep]
        if q.iso.size:
            zz = np.maximum(z, 1)[:, None]
            err = np.abs(q.precursor_mz[s] - q.iso[None, :] * C13 / zz - lib.precursor_mz[e][:, None])
            e = e[((err * zz if q.by_mass else err) <= q.width[s]).any(axis=1)]
        counts.append(e.size)
    assert np.array_equal(np.asarray(counts), ref.candidates)
    assert (ref.candidates > 0).sum() > 100  # the test saw real windows
    assert q.zmask[-1] == (1 << 2) | (1 << 3) | (1 << 63)


def test_a_da_window_bounds_the_mass(tmp_path):
    """0.5 Da: a 2+ entry 0.3 Th away (0.6 Da) is out, a 1+ entry 0.3 Th away (0.3 Da) is in."""
    _msp(tmp_path / "l.msp", [("PEPTIDEK/2", [(200.0, 36), (300.0, 64)]), ("PEPTIDEKK/1", [(200.0, 36)])])
    import_library([tmp_path / "l.msp"], tmp_path / "lib", LibraryParams(decoys=False))
    lib = load_library(tmp_path / "lib")
    for e in range(len(lib)):
        prec = float(lib.precursor_mz[e]) + 0.3
        query = Spectrum("r", 1, 2, np.array([200.0, 300.0]), np.array([36.0, 64.0], np.float32), prec, ())
        m = score_library(lib, [query], Tolerance(0.5, "Da"))
        assert m.candidates[0] == (1 if lib.charge[e] == 1 else 0)


def test_sequence_ids_compare_unmodified_sequences():
    assert sequence_ids(["PEPTIDEK", "PEPT[Phospho]IDEK", "[Acetyl]-PEPTIDEK", "AAAK", "PEPTIDEK"]).tolist() == [
        0, 0, 0, 1, 0]
