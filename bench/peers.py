"""Peer search engines (Comet, Sage) run on the bench's files, each timed as a whole process (`bench/search.py`).

Shared settings (`SETTINGS`): trypsin (KR, not before P), ≤ 2 missed cleavages, length 7–50, 500–5000 Da, C
+57.021464 fixed, M +15.9949 variable (≤ 2 per peptide), precursor ±20 ppm, isotope error 0, fragments 0.5 Da,
reversed decoys. PSMs at 1 % FDR: rank 1 per spectrum, q = decoys / targets at or above (`count_at_fdr`), and
Sage's own LDA.

comet
    Debian's comet-ms 2019.01 ``.deb`` and ``libmstoolkit82``'s (``apt-get download comet-ms libmstoolkit82``),
    from ``peers``, unpacked with ``dpkg -x``; its ``-p`` default params edited (`COMET_KEYS`). Comet bins
    fragments instead of a ±window: ``fragment_bin_tol 1.0005`` with ``offset 0.4`` is a 1 Da bin, the ±0.5 Da of
    the others. Concatenated internal decoys (``decoy_search 1``).
sage
    sagepy's wheels in ``peers`` (``pip download sagepy``; the connector built for this Python), unzipped, run in
    a child process (this file, ``--worker sage``; ``RAYON_NUM_THREADS``): native MGF reading (top 150 peaks, no
    deisotoping: Sage's defaults), its indexed database, one PSM per spectrum, then its LDA and q-values
    (``lda_rescore_psms``, ``sage_fdr_psm``). Stage seconds from inside; wall from outside.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETTINGS: dict[str, Any] = {
    "enzyme": "trypsin KR not before P", "missed_cleavages": 2, "length": [7, 50], "mass_da": [500, 5000],
    "fixed": "C +57.021464", "variable": "M +15.994915, max 2", "precursor_ppm": 20, "isotope_error": 0,
    "fragment_da": 0.5, "precursor_charges": [1, 6], "fdr": 0.01,
}  # fmt: skip
# the search settings `sage_worker` is given (`run_sage`'s ``search``): tolerances as (value, "ppm" or "Da"),
# isotope errors and precursor charges as (lowest, highest); Sage tries that charge range on a spectrum whose
# MGF entry has no CHARGE line
SAGE_SEARCH: dict[str, Any] = {
    "precursor": [SETTINGS["precursor_ppm"], "ppm"], "fragment": [SETTINGS["fragment_da"], "Da"],
    "isotope_errors": [SETTINGS["isotope_error"], SETTINGS["isotope_error"]], "charges": SETTINGS["precursor_charges"],
}  # fmt: skip
COMET_KEYS: dict[str, str] = {
    "decoy_search": "1", "peptide_mass_tolerance": "20.00", "peptide_mass_units": "2", "isotope_error": "0",
    "search_enzyme_number": "1", "num_enzyme_termini": "2", "allowed_missed_cleavage": "2",
    "variable_mod01": "15.9949 M 0 2 -1 0 0 0.0", "max_variable_mods_in_peptide": "2",
    "fragment_bin_tol": "1.0005", "fragment_bin_offset": "0.4", "theoretical_fragment_ions": "1",
    "output_txtfile": "1", "output_pepxmlfile": "0", "output_percolatorfile": "0", "output_sqtfile": "0",
    "print_expect_score": "1", "num_output_lines": "1", "digest_mass_range": "500.0 5000.0",
    "peptide_length_range": "7 50", "add_C_cysteine": "57.021464", "max_precursor_charge": "6",
    "decoy_prefix": "DECOY_",
}  # fmt: skip


def count_at_fdr(scores: list[float], decoy: list[bool], fdr: float = 0.01, higher_better: bool = True) -> int:
    """Targets with q ≤ ``fdr``; one best PSM per spectrum given, q = decoys / targets at or above (monotone)."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i] if higher_better else scores[i])
    targets = decoys = 0
    qs: list[float] = []
    for i in order:
        decoys += decoy[i]
        targets += not decoy[i]
        qs.append(decoys / max(targets, 1))
    best, passing = float("inf"), 0
    for i, q in zip(reversed(order), reversed(qs), strict=True):
        best = min(best, q)
        passing += best <= fdr and not decoy[i]
    return passing


def unpack_deb(deb: Path, dest: Path) -> None:
    """``dpkg -x`` (or, without dpkg, the ar archive's ``data.tar.*`` read here)."""
    if shutil.which("dpkg"):
        subprocess.run(["dpkg", "-x", str(deb), str(dest)], check=True)
        return
    import io
    import tarfile

    raw, pos = deb.read_bytes(), 8
    while pos + 60 <= len(raw):
        name, size = raw[pos:pos + 16].decode().strip().rstrip("/"), int(raw[pos + 48:pos + 58])
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(raw[pos + 60:pos + 60 + size])) as tf:
                tf.extractall(dest, filter="tar")
        pos += 60 + size + size % 2


def run_comet(peers: Path, fasta: Path, mgf: Path, work: Path, threads: int) -> dict[str, Any]:
    res: dict[str, Any] = {}
    root = work / "comet-root"
    shutil.rmtree(root, ignore_errors=True)
    debs = sorted(peers.rglob("*.deb"))
    for deb in debs:
        unpack_deb(deb, root)
    res["debs"] = [d.name for d in debs]
    binary = next(p for p in sorted(root.glob("usr/bin/comet*")) if p.is_file())
    libs = [str(p) for p in (root / "usr/lib", root / "usr/lib/x86_64-linux-gnu") if p.is_dir()]
    env = {**os.environ, "LD_LIBRARY_PATH": ":".join([*libs, os.environ.get("LD_LIBRARY_PATH", "")])}
    run_dir = work / "comet-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir()
    proc = subprocess.run([str(binary), "-p"], cwd=run_dir, env=env, capture_output=True, text=True)
    if not (run_dir / "comet.params.new").is_file():  # a missing libmstoolkitlite.so.82 shows here
        raise RuntimeError(f"comet -p rc {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}")
    default = (run_dir / "comet.params.new").read_text()
    res["version"] = default.splitlines()[0].removeprefix("# comet_version ").strip()
    keys = {**COMET_KEYS, "database_name": str(fasta.resolve()), "num_threads": str(threads)}
    lines: list[str] = []
    seen: set[str] = set()
    for line in default.splitlines():
        m = re.match(r"^(\w+)\s*=", line)
        if m and m[1] in keys:
            line = f"{m[1]} = {keys[m[1]]}"
            seen.add(m[1])
        lines.append(line)
    res["params_missing"] = sorted(set(keys) - seen)  # keys this version does not know (left out)
    (run_dir / "bench.params").write_text("\n".join(lines) + "\n")
    res["params"] = {k: v for k, v in keys.items() if k in seen}
    t0 = time.perf_counter()
    proc = subprocess.run([str(binary), "-Pbench.params", "-Nbench", str(mgf.resolve())], cwd=run_dir, env=env,
                          capture_output=True, text=True)  # fmt: skip
    res["wall_seconds"] = round(time.perf_counter() - t0, 2)
    res["rc"] = proc.returncode
    out = run_dir / "bench.txt"
    if proc.returncode or not out.is_file():
        raise RuntimeError(f"comet rc {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}")
    rows = out.read_text().splitlines()
    head = next(i for i, r in enumerate(rows) if r.startswith("scan\t"))
    cols = rows[head].split("\t")
    best: dict[str, tuple[float, bool]] = {}
    for r in rows[head + 1:]:
        f = dict(zip(cols, r.split("\t"), strict=False))
        if not f.get("e-value"):
            continue
        ev, is_decoy = float(f["e-value"]), all(p.startswith("DECOY_") for p in f["protein"].split(","))
        key = f["scan"]
        if key not in best or ev < best[key][0]:
            best[key] = (ev, is_decoy)
    ev_list, dec = [v[0] for v in best.values()], [v[1] for v in best.values()]
    res["spectra_with_psm"], res["decoys_rank1"] = len(best), sum(dec)
    res["psms_at_1pct_fdr"] = count_at_fdr(ev_list, dec, higher_better=False)
    return res


def sage_site(peers: Path, work: Path) -> Path:
    """sagepy's two wheels (the connector built for this Python) unzipped into ``work/sage-site``."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = []
    for pattern in ("sagepy-*-py3-none-any.whl", f"sagepy_connector-*-{tag}-{tag}-*.whl"):
        found = sorted(peers.rglob(pattern))
        if not found:
            raise FileNotFoundError(f"no {pattern} under {peers}")
        wheels.append(found[0])
    site = work / "sage-site"
    stamp = site / "wheels.txt"
    if not stamp.is_file() or stamp.read_text() != " ".join(w.name for w in wheels):
        shutil.rmtree(site, ignore_errors=True)
        for w in wheels:
            with zipfile.ZipFile(w) as zf:
                zf.extractall(site)
        stamp.write_text(" ".join(w.name for w in wheels))
    return site


def run_sage(peers: Path, fasta: Path, mgf: Path, work: Path, threads: int, search: dict[str, Any] | None = None,
             psms: Path | None = None) -> dict[str, Any]:
    """Sage in a worker process (`sage_worker`) with ``search`` (default `SAGE_SEARCH`); its PSMs to ``psms``."""
    site = sage_site(peers, work)
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)}  # fmt: skip
    t0 = time.perf_counter()
    cmd = [sys.executable, __file__, "--worker", "sage", "--fasta", str(fasta), "--mgf", str(mgf), "--threads",
           str(threads), "--sage-search", json.dumps(search or SAGE_SEARCH), *(["--psms", str(psms)] if psms else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = round(time.perf_counter() - t0, 2)
    last = proc.stdout.strip().splitlines()[-1:] or [""]
    if proc.returncode or not last[0].startswith("{"):
        raise RuntimeError(f"sage worker rc {proc.returncode}: {proc.stderr[-1500:]}")
    return {"wall_seconds": wall, **json.loads(last[0])}


def sage_tolerance(value: float, unit: str) -> Any:
    """A symmetric ``Tolerance`` of sagepy: ``value`` ppm or Da either side."""
    from sagepy.core import Tolerance

    return Tolerance(ppm=(-value, value)) if unit == "ppm" else Tolerance(da=(-value, value))


def write_sage_psms(psms: list[Any], out: Path) -> None:
    """One TSV row per PSM: ``q_value``, Sage's (its LDA's discriminant, (decoys + 1) / targets); ``q_lda`` and
    ``q_hyperscore``, the discriminant and the hyperscore competed as rtsearch does (`rtsearch.search.fdr`)."""
    import numpy as np

    from rtsearch.search.fdr import q_values

    decoy = np.array([p.decoy for p in psms], dtype=bool)
    # decoys / targets, as these peers' columns are documented (bench/entrapment.py); Sage's own q_value has the +1
    lda = np.array([p.sage_feature.discriminant_score for p in psms], dtype=np.float64)
    q_lda = q_values(lda, decoy, plus_one=False).tolist()
    q_hyper = q_values(np.array([p.hyperscore for p in psms], dtype=np.float64), decoy, plus_one=False).tolist()
    with open(out, "w") as fh:
        fh.write("spectrum\tpeptide\tcharge\tis_decoy\tproteins\thyperscore\tdiscriminant\tq_value\tq_lda\tq_hyperscore\n")
        for p, ql, qh in zip(psms, q_lda, q_hyper, strict=True):
            f = p.sage_feature
            fh.write(f"{p.spec_idx}\t{p.sequence}\t{p.charge}\t{str(p.decoy).lower()}\t{';'.join(p.proteins)}\t"
                     f"{p.hyperscore}\t{f.discriminant_score}\t{f.spectrum_q}\t{ql}\t{qh}\n")  # fmt: skip


def sage_worker(fasta: Path, mgf: Path, threads: int, search: dict[str, Any], psms_out: Path | None) -> dict[str, Any]:
    """The Sage search itself (in the child process, sagepy on its path); its PSMs to ``psms_out``."""
    from importlib.metadata import version

    from sagepy.core import EnzymeBuilder, SageSearchConfiguration, Scorer
    from sagepy.core.fdr import assign_initial_spectrum_q_psms, lda_rescore_psms, sage_fdr_psm
    from sagepy.core.ml.retention_model import predict_sage_rt
    from sagepy.core.spectrum import read_processed_spectra

    res: dict[str, Any] = {"version": version("sagepy")}
    stage: dict[str, float] = {}
    t = time.perf_counter()
    spectra = read_processed_spectra(str(mgf), take_top_n=150, deisotope=False, num_threads=threads)
    stage["read"], t = time.perf_counter() - t, time.perf_counter()
    static, variable = {"C": "[UNIMOD:4]"}, {"M": ["[UNIMOD:35]"]}
    enzyme = EnzymeBuilder(missed_cleavages=2, min_len=7, max_len=50, cleave_at="KR", restrict="P", c_terminal=True)
    cfg = SageSearchConfiguration(fasta=fasta.read_text(), enzyme_builder=enzyme, peptide_min_mass=500.0,
                                  peptide_max_mass=5000.0, static_mods=static, variable_mods=variable,
                                  max_variable_mods=2, generate_decoys=True, decoy_tag="rev_")  # fmt: skip
    db = cfg.generate_indexed_database()
    stage["database"], t = time.perf_counter() - t, time.perf_counter()
    res["peptides"] = db.num_peptides
    precursor = sage_tolerance(*search["precursor"])
    (iso_lo, iso_hi), (z_lo, z_hi) = search["isotope_errors"], search["charges"]
    scorer = Scorer(precursor_tolerance=precursor, fragment_tolerance=sage_tolerance(*search["fragment"]),
                    min_isotope_err=iso_lo, max_isotope_err=iso_hi, min_precursor_charge=z_lo,
                    max_precursor_charge=z_hi, report_psms=1, static_mods=static, variable_mods=variable)  # fmt: skip
    psms = [p for ps in scorer.score_collection_psm(db, spectra, num_threads=threads).values() for p in ps]
    stage["search"], t = time.perf_counter() - t, time.perf_counter()
    res["spectra"], res["spectra_with_psm"], res["decoys_rank1"] = len(spectra), len(psms), sum(p.decoy for p in psms)
    res["psms_at_1pct_fdr_hyperscore"] = count_at_fdr([p.hyperscore for p in psms], [p.decoy for p in psms])
    assign_initial_spectrum_q_psms(psms)
    try:
        predict_sage_rt(psms, db)
        res["rt_model"] = "fitted"
    except RuntimeError as exc:  # the sage CLI ignores a failed fit too
        res["rt_model"] = f"skipped: {exc}"
    res["lda_fitted"] = bool(lda_rescore_psms(psms, precursor))
    sage_fdr_psm(psms, db, use_hyper_score=False)
    res["psms_at_1pct_fdr_lda"] = sum(1 for p in psms if not p.decoy and p.sage_feature.spectrum_q <= 0.01)
    stage["fdr"] = time.perf_counter() - t
    if psms_out:
        write_sage_psms(psms, psms_out)
    res["stage_seconds"] = {k: round(v, 2) for k, v in stage.items()}
    res["psms_at_1pct_fdr"] = res["psms_at_1pct_fdr_lda"]
    res["search"] = search
    res["settings"] = {"take_top_n": 150, "deisotope": False, "min_matched_peaks": 6, "max_fragment_charge": 3,
                       "bucket_size": 8192, "decoys": "reversed, rev_", "score": "openmshyperscore"}  # fmt: skip
    return res


def main() -> int:
    """The Sage worker (`run_sage` starts this file as a child with sagepy on its path)."""
    ap = argparse.ArgumentParser(description="bench/peers.py --worker sage: Sage's search, run by bench/search.py")
    ap.add_argument("--worker", choices=["sage"], required=True)
    ap.add_argument("--fasta", type=Path, required=True)
    ap.add_argument("--mgf", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--sage-search", type=json.loads, default=SAGE_SEARCH)
    ap.add_argument("--psms", type=Path)
    args = ap.parse_args()
    print(json.dumps(sage_worker(args.fasta, args.mgf, args.threads, args.sage_search, args.psms)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
