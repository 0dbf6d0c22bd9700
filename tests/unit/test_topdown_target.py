"""Top-down search as a target like the others: deconvoluted spectra through `SpectraBatch`, PrSMs named with their
shifts, proteoform ids, E-values, and the results table's PrSM- and proteoform-level q-values (NumPy)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.config import ProteoformConfig, TopDownConfig
from rtsearch.database.fasta import read_fasta
from rtsearch.proteoforms.database import build_proteoforms
from rtsearch.search.table import PsmTable
from rtsearch.search.topdown import TopDownTarget, pack, unpack
from rtsearch.types import PROTON, DeconvolutedSpectrum, Precursor, Spectrum
from tests.conftest import data_dir
from tests.topdown_sim import simulate


@pytest.fixture(scope="module")
def small():
    """150 E. coli proteins of the FLASHApp database and their shuffled decoys."""
    proteins = read_fasta(data_dir() / "topdown-flashapp-ecoli" / "example_database.fasta")[:150]
    return build_proteoforms(proteins, ProteoformConfig())


def test_match_ids_pack_and_unpack() -> None:
    protein = np.array([0, 1, 8_837, 67_000_000])
    start, end = np.array([0, 1, 57, 131_000]), np.array([1, 300, 131_071, 131_071])
    kind = np.array([-1, 0, 2, 3])
    ids = pack(protein, start, end, kind)
    assert (ids >= 0).all() and len(set(ids.tolist())) == 4
    for got, want in zip(unpack(ids), (protein, start, end, kind), strict=True):
        assert got.tolist() == want.tolist()


def test_deconvoluted_spectra_travel_as_charge_one() -> None:
    d = DeconvolutedSpectrum("r", 7, 2, np.array([1000.0, 2500.5]), np.array([5, 6], np.float32),
                             np.array([2, 3], np.int16), (Precursor(9000.25, 1000.0, 9, 1e6),), rt=12.5)  # fmt: skip
    sp = d.as_spectrum()
    assert sp.charges == (1,) and sp.precursor_mz == pytest.approx(9000.25 + PROTON)
    assert sp.mz.tolist() == pytest.approx([1000.0 + PROTON, 2500.5 + PROTON])
    back = DeconvolutedSpectrum.of(sp, "ETD")
    assert back.mass.tolist() == pytest.approx([1000.0, 2500.5]) and back.precursors[0].mass == pytest.approx(9000.25)
    assert back.activation == "ETD" and back.rt == 12.5 and back.problem == ""
    doubly = Spectrum("r", 8, 2, np.array([500.0]), np.ones(1, np.float32), 700.0, (2,))
    assert "not a deconvoluted spectrum" in DeconvolutedSpectrum.of(doubly).problem
    none = Spectrum("r", 9, 2, np.array([500.0]), np.ones(1, np.float32), 0.0, (1,))
    assert DeconvolutedSpectrum.of(none).problem == "no precursor mass"


def test_a_batch_of_simulated_proteoforms_is_identified_and_named(small) -> None:
    """Three truncated proteoforms with a known shift each (and one spectrum that is not deconvoluted) in one
    batch: each found at its residues with its shift, named in ProForma with the shift, E-values small."""
    target = TopDownTarget(small, TopDownConfig(tolerance_da=0.01, fragment_ppm=0))
    rng = np.random.default_rng(11)
    long = [k for k in range(150) if small.offsets[k + 1] - small.offsets[k] > 220]
    truth, spectra = [], []
    for scan, shift in enumerate((0.0, 79.966331, -18.010565)):
        k = int(rng.choice(long))
        a, b = int(rng.integers(10, 60)), int(rng.integers(130, 200))
        full = small.prefix_of(k)
        # a phosphate's mass on the first S, T or Y from the proteoform's 41st residue on, the rest on the 41st
        on = 40 + next(j for j, aa in enumerate(small.sequence(k)[a + 40 : b]) if aa in "STY") if shift > 79 else 40
        d = simulate(small, -1, shift, rng, prefix=full[a : b + 1] - full[a], site=on)  # on residue a + on + 1
        d.scan = scan
        truth.append((k, a, b, shift, a + on + 1))
        spectra.append(d.as_spectrum())
    spectra.append(Spectrum("sim", 99, 2, np.array([500.0, 600.0]), np.ones(2, np.float32), 800.0, (3,)))
    scored = target.score(SpectraBatch.of(spectra))
    assert scored.names is not None
    for i, (k, a, b, shift, site) in enumerate(truth):
        protein, start, end, kind = (int(v[0]) for v in unpack(scored.best.match[i : i + 1]))
        assert (protein, start, end, kind) == (k, a, b, -1)
        feats = dict(zip(target.features, scored.best.features[i], strict=True))
        assert feats["mass_shift"] == pytest.approx(shift, abs=1e-6)
        assert feats["neg_log10_evalue"] > 10  # 30+ matched PRMs of a few dozen: far beyond chance
        seq = small.sequence(k)[a:b]
        name = scored.names.peptides[i]
        assert re.sub(r"\[[^]]*\]|[()]", "", name) == seq  # the sequence, a shift's mass and range marked in it
        if shift:
            first, last = int(feats["shift_first"]), int(feats["shift_last"])
            assert first <= site <= last and last - first < 10  # 1-based in the protein; 40 of ~150 cleavages seen
            assert 0.15 < feats["shift_score"] <= 1.0  # the MIScore of the range
            label = "[Phospho]" if shift > 79 else f"[{shift:+.4f}]"  # a known PTM's mass: placed on S, T, Y alone
            assert label in name and ("(" in name) == (first < last)
            if shift > 79:
                assert set(small.sequence(k)[first - 1 : last : last - first or 1]) <= set("STY")  # its two ends
        else:
            assert name == seq and np.isnan(feats["shift_first"]) and np.isnan(feats["shift_score"])
        assert scored.names.proteins[i] == [small.accessions[k]]
    assert scored.best.match[3] == -1 and "not a deconvoluted spectrum" in scored.reason[3]


def test_the_results_table_gives_prsm_and_proteoform_q_values(small) -> None:
    """Twelve simulated PrSMs of six proteoforms (two spectra each) among 40 noise spectra: the true ones rank
    first by E-value, at q <= (0 + 1) / 12 and (0 + 1) / 6 at the two levels (no decoy above them: the reported
    rule is (decoys + 1) / targets); the proteoform columns are 1-based and inclusive."""
    target = TopDownTarget(small, TopDownConfig(tolerance_da=0.01, fragment_ppm=0, truncations=False))
    rng = np.random.default_rng(5)
    forms = rng.choice(np.flatnonzero(~small.is_decoy[small.form_protein] & (small.form_mass > 6000)), 6, False)
    spectra = []
    for f in forms.tolist():
        for _ in range(2):
            d = simulate(small, f, 0.0, rng)
            d.scan = len(spectra)
            spectra.append(d.as_spectrum())
    for _ in range(40):  # noise: random masses under a random precursor of the database's forms
        prec = float(rng.choice(small.form_mass)) + float(rng.uniform(-300, 300))
        mass = np.sort(rng.uniform(300, prec - 300, 40))
        d = DeconvolutedSpectrum("sim", len(spectra), 2, mass, np.ones(40, np.float32), np.ones(40, np.int16),
                                 (Precursor(prec),))  # fmt: skip
        spectra.append(d.as_spectrum())
    table = PsmTable(target)
    table.add(target.score(SpectraBatch.of(spectra)))
    cols = table.columns()
    q, pq = np.asarray(cols["q_value"]), np.asarray(cols["peptide_q_value"])
    assert q[:12].max() <= 1 / 12 and pq[:12].max() <= 1 / 6
    assert table.counts_at(1 / 12)[0] >= 12 and table.counts_at(1 / 6)[1] >= 6
    assert table.counts_at(0.01) == (0, 0)  # 12 PrSMs are no list at 1 %
    for i, f in enumerate(np.repeat(forms, 2).tolist()):
        k, start = int(small.form_protein[f]), int(small.form_start[f])
        assert cols["proteins"][i] == small.accessions[k]
        assert cols["proteoform_start"][i] == start + 1
        assert cols["proteoform_end"][i] == small.offsets[k + 1] - small.offsets[k]
        assert cols["evalue"][i] < 1e-10 and cols["unknown_shifts"][i] == 0


def test_warm_up_spectra_look_like_a_deconvoluted_run(small) -> None:
    """What the daemon's engine-time model learns from: 30 masses a spectrum (a real run's ~20 and their PRMs),
    3–30 kDa precursors, charge 1 — and the odd ones, answered as not deconvoluted."""
    target = TopDownTarget(small, TopDownConfig(truncations=False))
    spectra = target.warm_up_spectra(64)
    plain = [s for s in spectra if s.charges == (1,)]
    assert len(spectra) == 64 and 56 <= len(plain) < 64
    assert all(s.mz.shape[0] == 30 and 3_000 < s.precursor_mz < 30_100 for s in plain)
    scored = target.score(SpectraBatch.of(spectra))
    assert (scored.best.match[[i for i, s in enumerate(spectra) if s.charges == (1,)]] >= 0).mean() > 0.9
