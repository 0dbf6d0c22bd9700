"""Run TopPIC 1.5.3 on a FLASHDeconv / TopFD msalign file and summarise its PrSMs (`bench/topdown.py --toppic`).

The command run (inside ``--work``, defaults shown) is::

    toppic -d -e 15 -s 1 -m -500 -M 500 -t FDR -v 0.01 -T FDR -V 0.01 -u 2 \\
        <db>.fasta <name>_ms2.msalign            # plus -x if no feature file

Input rewriting
---------------
TopPIC 1.5.3 reads the spectrum id only from an ``ID=`` line. FLASHDeconv
(and IsoDec) msalign files write ``SPECTRUM_ID=`` instead, so every spectrum
gets id -1 and the run dies after the full search at "Merging PrSMs" with
``prsm_str_merge.cpp[75]: Error in the order of reported PrSMs!``. The copy
in ``--work`` therefore gets ``ID=<SPECTRUM_ID>`` (or the 0-based spectrum
index if SPECTRUM_ID is missing or not ascending) and ``FRACTION_ID=0``.

TopPIC 1.5.3 also reads ``<name>.feature`` (next to the msalign) with the
TopFD 1.5 column order (``Spec_ID, Fraction_ID, File_name, ...``); the newer
FLASHDeconv / TopFD 1.6 layout (``File_name, Fraction_ID, Spectrum_ID, ...``)
would crash its parser, so that file is rewritten to the 1.5 layout with the
same ids. Without a feature file (or with ``--no-feature``) ``-x`` is passed.

Output
------
Parses ``<name>_toppic_prsm_single.tsv`` (one row per PrSM that passed the
1 % FDR cutoffs; the rows are preceded by TopPIC's parameter block) and prints
counts of PrSMs and proteoforms plus scan, accession, first/last residue,
mass shift(s) (the bracketed numbers in the ``Proteoform`` column), E-value
and q-values; ``--json PATH`` writes the same summary as JSON.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "topdown-flashapp-ecoli"
FEATURE_15 = ["Spec_ID", "Fraction_ID", "File_name", "Scans", "MS_one_ID", "MS_one_scans",
              "Precursor_mass", "Precursor_intensity", "Fraction_feature_ID",
              "Fraction_feature_intensity", "Fraction_feature_score",
              "Fraction_feature_time_apex", "Sample_feature_ID", "Sample_feature_intensity"]
# TopFD 1.5 column -> column of the FLASHDeconv / TopFD 1.6 ms2 feature file
FEATURE_FROM_16 = {"Spec_ID": "Spectrum_ID", "MS_one_scans": "MS_one_scans",
                   "Precursor_mass": "Precursor_monoisotopic_mz",
                   "Fraction_feature_time_apex": "Fraction_feature_apex_time",
                   "Sample_feature_ID": "Fraction_feature_ID",
                   "Sample_feature_intensity": "Fraction_feature_intensity"}
SHIFT_RE = re.compile(r"\[([+-]?\d+(?:\.\d+)?)\]")


def fail(msg):
    sys.exit(f"toppic_run: error: {msg}")


def rewrite_msalign(src, dst):
    """Copy ``src`` to ``dst`` giving every spectrum an ``ID=`` line; return {old id: new id}."""
    blocks, cur = [], None
    for line in src.read_text().splitlines():
        if line.strip() == "BEGIN IONS":
            cur = [line]
        elif cur is not None:
            cur.append(line)
            if line.strip() == "END IONS":
                blocks.append(cur)
                cur = None
    keys = [dict(l.split("=", 1) for l in b if "=" in l) for b in blocks]
    if all("ID" in k for k in keys):
        shutil.copyfile(src, dst)
        return None
    old = [k.get("SPECTRUM_ID") for k in keys]
    try:
        ids = [int(x) for x in old]
        ok = all(a < b for a, b in zip(ids, ids[1:], strict=False))
    except (TypeError, ValueError):
        ok = False
    new = ids if ok else list(range(len(blocks)))
    out = []
    for block, k, i in zip(blocks, keys, new, strict=False):
        extra = [f"ID={i}"] + ([] if "FRACTION_ID" in k else ["FRACTION_ID=0"])
        body = [l for l in block[1:] if not l.startswith(("ID=", "SPECTRUM_ID="))]
        out += [block[0]] + extra + body + [""]
    dst.write_text("\n".join(out))
    return {o: str(n) for o, n in zip(old, new, strict=False) if o is not None}


def rewrite_feature(src, dst, id_map):
    """Copy an ms2 feature file to ``dst`` in the TopFD 1.5 column order."""
    rows = [l.rstrip("\n").split("\t") for l in src.read_text().splitlines() if l.strip()]
    head = rows[0]
    if head[0] == "Spec_ID":
        shutil.copyfile(src, dst)
        return
    col = {h: i for i, h in enumerate(head)}
    lines = ["\t".join(FEATURE_15)]
    for r in rows[1:]:
        vals = [r[col[FEATURE_FROM_16.get(name, name)]] for name in FEATURE_15]
        if id_map is not None:
            vals[0] = id_map.get(vals[0], vals[0])
        lines.append("\t".join(vals))
    dst.write_text("\n".join(lines) + "\n")


def parse_prsms(tsv):
    """Return the PrSM rows of a TopPIC ``*_toppic_prsm_single.tsv`` as dicts."""
    lines = tsv.read_text().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("Data file name\t")), None)
    if start is None:
        fail(f"no PrSM table header in {tsv}")
    head = lines[start].split("\t")
    prsms = []
    for line in lines[start + 1:]:
        r = dict(zip(head, line.split("\t"), strict=False))
        if not r.get("Spectrum ID"):
            continue  # extra protein-hit rows carry no spectrum
        prsms.append({
            "scan": r["Scan(s)"], "spectrum_id": int(r["Spectrum ID"]),
            "protein": r["Protein accession"], "first": int(r["First residue"]),
            "last": int(r["Last residue"]), "proteoform_id": int(r["Proteoform ID"]),
            "shifts": [float(x) for x in SHIFT_RE.findall(r["Proteoform"])],
            "proteoform": r["Proteoform"], "nterm_form": r["Protein N-terminal form"],
            "evalue": float(r["E-value"]),
            "qvalue": r["Spectrum-level Q-value"], "proteoform_qvalue": r["Proteoform-level Q-value"],
        })
    return prsms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--msalign", type=Path, default=DATA / "toppic_ms2.msalign")
    ap.add_argument("--fasta", type=Path, default=DATA / "example_database.fasta")
    ap.add_argument("--work", type=Path, default=Path("/tmp/toppic_run"),
                    help="scratch directory (a previous run there is replaced)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tolerance-ppm", type=int, default=15)
    ap.add_argument("--shifts", type=int, choices=(0, 1, 2), default=1,
                    help="max unexpected mass shifts (-500..+500 Da)")
    ap.add_argument("--decoy", action=argparse.BooleanOptionalAction, default=True,
                    help="shuffled decoys + 1%% FDR cutoffs (else E-value 0.01)")
    ap.add_argument("--no-feature", action="store_true", help="ignore any .feature file (-x)")
    ap.add_argument("--skip-html", action="store_true", help="pass -g (no HTML output)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds")
    ap.add_argument("--json", type=Path, help="write the summary here")
    a = ap.parse_args()

    exe = shutil.which("toppic")
    if exe is None:
        fail("toppic not found on PATH (Debian: apt-get install toppic)")
    for p in (a.msalign, a.fasta):
        if not p.is_file():
            fail(f"no such file: {p}")
    if a.work.exists() and any(a.work.iterdir()):
        if not (a.work / "toppic.log").is_file():
            fail(f"{a.work} is not empty and not a previous toppic_run directory")
        shutil.rmtree(a.work)
    a.work.mkdir(parents=True)
    msalign, fasta = a.work / a.msalign.name, a.work / a.fasta.name
    shutil.copyfile(a.fasta, fasta)
    id_map = rewrite_msalign(a.msalign, msalign)
    feature = a.msalign.with_suffix(".feature")
    use_feature = feature.is_file() and not a.no_feature
    if use_feature:
        rewrite_feature(feature, a.work / feature.name, id_map)

    cut = ["-t", "FDR", "-v", "0.01", "-T", "FDR", "-V", "0.01"] if a.decoy else \
          ["-t", "EVALUE", "-v", "0.01", "-T", "EVALUE", "-V", "0.01"]
    cmd = (["toppic"] + (["-d"] if a.decoy else []) +
           ["-e", str(a.tolerance_ppm), "-s", str(a.shifts), "-m", "-500", "-M", "500"] + cut +
           ["-u", str(a.threads)] + ([] if use_feature else ["-x"]) +
           (["-g"] if a.skip_html else []) + [fasta.name, msalign.name])
    print("running in", a.work, ":", " ".join(cmd), flush=True)
    log = a.work / "toppic.log"
    t0 = time.monotonic()
    with open(log, "w") as fh:
        try:
            rc = subprocess.run(cmd, cwd=a.work, stdout=fh, stderr=subprocess.STDOUT,
                                timeout=a.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    wall = time.monotonic() - t0
    tsv = a.work / (msalign.stem + "_toppic_prsm_single.tsv")
    if rc != 0 or not tsv.is_file():
        tail = log.read_text(errors="replace").replace("\r", "\n").strip().splitlines()[-15:]
        fail(f"toppic exit {rc} after {wall:.0f} s; last lines of {log}:\n  " + "\n  ".join(tail))

    prsms = parse_prsms(tsv)
    summary = {"command": " ".join(cmd), "work": str(a.work), "wall_s": round(wall, 1),
               "prsm_tsv": str(tsv), "msalign_rewritten": id_map is not None,
               "feature_file": use_feature, "n_prsms": len(prsms),
               "n_proteoforms": len({p["proteoform_id"] for p in prsms}), "prsms": prsms}
    print(f"wall {wall:.1f} s; {len(prsms)} PrSMs, {summary['n_proteoforms']} proteoforms"
          f" ({'1% FDR' if a.decoy else 'E-value 0.01'})")
    print(f"{'scan':>6} {'protein':<28} {'first-last':>10} {'shift(s) Da':>12} "
          f"{'E-value':>10} {'q':>8}")
    for p in prsms:
        shifts = ",".join(f"{s:+.2f}" for s in p["shifts"]) or "-"
        print(f"{p['scan']:>6} {p['protein'][:28]:<28} {p['first']:>5}-{p['last']:<4} "
              f"{shifts:>12} {p['evalue']:>10.3g} {p['qvalue']:>8}")
    if a.json:
        a.json.write_text(json.dumps(summary, indent=2) + "\n")
        print("wrote", a.json)


if __name__ == "__main__":
    main()
