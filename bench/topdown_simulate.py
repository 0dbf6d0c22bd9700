"""Simulated deconvoluted top-down MS2 spectra with known truth, written as a TopFD 1.6 msalign.

Each spectrum is one proteoform of a target protein of the FASTA (seeded, `numpy.random.default_rng`):

- type: 40 % complete (a protein starting with M: Met cleaved at 50 %, then N-terminal acetylation at 50 %,
  so none / nme / nme_acetyl / m_acetyl as TopPIC's N-terminal forms), 30 % terminal truncation (the N- or
  C-terminus kept, 50-150 residues), 30 % internal truncation (50-150 residues, neither terminus);
- shift: 40 % none, 30 % one known PTM (Phospho@STY, Acetyl@K, Oxidation@M, Methyl@KR on a random residue of
  that kind; none if the proteoform has none), 30 % one unknown shift, uniform in +-(20, 400) Da, on a random
  residue of the proteoform's middle half;
- proteoform mass (shift included) 3-30 kDa, else redrawn;
- fragments (median ~19 masses a spectrum, as FLASHDeconv's here): Poisson(14) true masses (at least 4) at
  uniform cleavage sites, b (prefix residues) or y (suffix residues + H2O) at 50/50, the shift included when
  its residue lies in the fragment; 3 ppm sd mass error, 10 % +1.00235 Da (isotope error); Poisson(6) noise
  masses uniform in (300, M - 300); random intensities, charges 1-15;
- precursor: proteoform mass + shift, 2 ppm sd error, 10 % +1.00235 Da.

Writes ``DIR/sim_ms2.msalign`` (TopFD 1.6 layout: ``ID=`` 0-based, ``SCANS=1000+i``), a copy of the FASTA and
``DIR/truth.json`` (per scan: accession, first/last residue 1-based inclusive, N-terminal form, shift mass,
kind ``none`` | ``known:<name>`` | ``unknown``, shift residue 1-based in the protein). The command used::

    .venv/bin/python bench/topdown_simulate.py --n 150 --seed 7 --out /tmp/tdsim
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtsearch.config import ProteoformConfig  # noqa: E402
from rtsearch.database.fasta import read_fasta  # noqa: E402
from rtsearch.database.mods import UNIMOD  # noqa: E402
from rtsearch.io.msalign import read_msalign  # noqa: E402
from rtsearch.proteoforms.database import build_proteoforms  # noqa: E402
from rtsearch.scoring.topdown.prm import WATER  # noqa: E402

FASTA = Path(__file__).resolve().parents[2] / "shared" / "data" / "topdown-flashapp-ecoli" / "example_database.fasta"
PROTON = 1.007276467
ISOTOPE = 1.00235
KNOWN = [("Phospho", "STY"), ("Acetyl", "K"), ("Oxidation", "M"), ("Methyl", "KR")]


def proteoform(rng, db, targets):
    """One random proteoform: a dict of its truth plus its prefix masses (``_prefix``, N-terminal mod included)."""
    while True:
        k = int(rng.choice(targets))
        seq, prefix = db.sequence(k), db.prefix_of(k)
        n, u = len(seq), rng.random()
        start, end, nterm, delta = 0, n, "none", 0.0
        if u < 0.4:
            kind = "complete"
            if seq[0] == "M":
                if rng.random() < 0.5:
                    start, nterm = 1, "nme"
                if rng.random() < 0.5:
                    nterm, delta = ("nme_acetyl" if start else "m_acetyl"), UNIMOD["Acetyl"]
        else:
            length = int(rng.integers(50, 151))
            if u < 0.7:
                if n <= length:
                    continue
                kind = "terminal"
                start, end = (0, length) if rng.random() < 0.5 else (n - length, n)
            else:
                if n < length + 2:
                    continue
                kind = "internal"
                start = int(rng.integers(1, n - length))
                end = start + length
        pre = prefix[start : end + 1] - prefix[start]
        pre[1:] += delta
        length = end - start
        v, shift, skind, site = rng.random(), 0.0, "none", -1  # site: 0-based in the protein
        if 0.4 <= v < 0.7:
            name, residues = KNOWN[int(rng.integers(len(KNOWN)))]
            where = [start + i for i, aa in enumerate(seq[start:end]) if aa in residues]
            if where:
                shift, skind, site = UNIMOD[name], f"known:{name}", int(rng.choice(where))
        elif v >= 0.7:
            shift = float(rng.uniform(20, 400) * rng.choice([-1.0, 1.0]))
            skind = "unknown"
            site = start + int(rng.integers(length // 4, max(3 * length // 4, length // 4 + 1)))
        mass = float(pre[-1]) + WATER + shift
        if 3000 <= mass <= 30000:
            return {"accession": db.accessions[k], "first": start + 1, "last": end, "type": kind, "nterm": nterm,
                    "shift": round(shift, 6), "shift_kind": skind, "shift_site": site + 1 if site >= 0 else 0,
                    "mass": round(mass, 6), "_prefix": pre, "_site": site - start}


def fragments(rng, pf):
    """(mass, intensity, charge) arrays of one spectrum of proteoform ``pf``, ascending by mass."""
    pre, site, shift, mass = pf["_prefix"], pf["_site"], pf["shift"], pf["mass"]
    length = len(pre) - 1
    count = min(max(4, int(rng.poisson(14))), length - 1)
    cuts = rng.choice(np.arange(1, length), size=count, replace=False)
    is_b = rng.random(count) < 0.5
    total = pre[-1] + WATER
    b = pre[cuts] + np.where((site >= 0) & (site < cuts), shift, 0.0)
    y = total - pre[cuts] + np.where((site >= 0) & (site >= cuts), shift, 0.0)
    true = np.where(is_b, b, y)
    true = true * (1 + rng.normal(0, 3e-6, count)) + np.where(rng.random(count) < 0.1, ISOTOPE, 0.0)
    noise = rng.uniform(300, mass - 300, int(rng.poisson(6)))
    masses = np.concatenate([true, noise])
    inten = rng.lognormal(np.log(5e4), 1.0, masses.size)
    charge = rng.integers(1, 16, masses.size)
    order = np.argsort(masses)
    return masses[order], inten[order], charge[order]


def entry(i, pf, rng):
    """The msalign text of spectrum ``i``."""
    prec = pf["mass"] * (1 + rng.normal(0, 2e-6)) + (ISOTOPE if rng.random() < 0.1 else 0.0)
    z = int(np.clip(round(prec / 1000 + rng.normal(0, 1.5)), 3, 40))
    mz, inten, charge = fragments(rng, pf)
    head = [
        "BEGIN IONS", f"ID={i}", "FRACTION_ID=0", f"SCANS={1000 + i}", f"RETENTION_TIME={600 + 12.5 * i:.2f}",
        "LEVEL=2", "ACTIVATION=CID", "MS_ONE_ID=0", "MS_ONE_SCAN=0", f"PRECURSOR_MZ={(prec + z * PROTON) / z:.5f}",
        f"PRECURSOR_CHARGE={z}", f"PRECURSOR_MASS={prec:.5f}", f"PRECURSOR_INTENSITY={rng.uniform(1e5, 1e7):.2f}",
    ]
    peaks = [f"{m:.5f}\t{a:.2f}\t{c}" for m, a, c in zip(mz, inten, charge, strict=True)]
    return "\n".join(head + peaks + ["END IONS", ""]) + "\n", len(peaks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fasta", type=Path, default=FASTA)
    ap.add_argument("--n", type=int, default=150, help="spectra")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, required=True, help="folder to write (created)")
    args = ap.parse_args()
    db = build_proteoforms(read_fasta(args.fasta), ProteoformConfig(decoys="none"))
    targets = np.flatnonzero(~db.is_decoy)
    rng = np.random.default_rng(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    text = [f"#TopFD 1.6 layout, simulated by bench/topdown_simulate.py --n {args.n} --seed {args.seed}\n",
            f"#Database: {args.fasta.name}\n", "#Activation type:\tCID\n", f"#Number of MS/MS scans:\t{args.n}\n\n"]
    truth, sizes = {}, []
    for i in range(args.n):
        pf = proteoform(rng, db, targets)
        block, size = entry(i, pf, rng)
        text.append(block)
        sizes.append(size)
        truth[str(1000 + i)] = {k: v for k, v in pf.items() if not k.startswith("_")}
    msalign = args.out / "sim_ms2.msalign"
    msalign.write_text("".join(text))
    shutil.copyfile(args.fasta, args.out / args.fasta.name)
    (args.out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    spectra = list(read_msalign(msalign))
    bad = [s.scan for s in spectra if s.problem]
    if len(spectra) != args.n or bad:
        sys.exit(f"topdown_simulate: {msalign} reads back {len(spectra)} spectra, problems at scans {bad[:5]}")
    kinds = [t["type"] for t in truth.values()]
    shifts = [t["shift_kind"].split(":")[0] for t in truth.values()]
    print(f"wrote {msalign} ({args.n} spectra, median {np.median(sizes):.0f} masses), truth.json, {args.fasta.name}")
    print("types:", {k: kinds.count(k) for k in sorted(set(kinds))},
          "shifts:", {k: shifts.count(k) for k in sorted(set(shifts))},
          f"masses {min(t['mass'] for t in truth.values()):.0f}-{max(t['mass'] for t in truth.values()):.0f} Da")
    return 0


if __name__ == "__main__":
    sys.exit(main())
