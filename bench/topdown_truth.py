"""Score top-down PrSMs against a simulation's truth (``bench/topdown_simulate.py``'s ``truth.json``).

Engines: rtsearch (results TSV: scan, proteins, is_decoy, q_value, proteoform_start/_end, shift_first/_last …)
and TopPIC (the JSON of ``bench/toppic_run.py --json``: its ``prsms``). For each, the target PrSMs at
q <= 0.01 (``--q``) are counted, and those correct: the truth's accession, and residue ranges overlapping by
at least half the truth's length. A PrSM of another protein with the same residues there (paralogs, the
FASTA's duplicate entries) is counted apart as "same-seq", neither correct nor wrong. Correct proteoforms are
the distinct truth proteoforms among the correct PrSMs. Localization, for a correct PrSM whose truth has a
shift: whether the engine's shift site range contains the truth's residue (TopPIC: the parenthesised residues
before a bracketed shift in its ``proteoform`` string; rtsearch: its ``shift_first``/``shift_last`` columns,
where the TSV has them). Prints a table; ``--json PATH`` writes it. The command used::

    .venv/bin/python bench/topdown_truth.py --truth /tmp/tdsim/truth.json --toppic /tmp/tdsim/toppic.json \\
        --rtsearch /tmp/tdsim/rt20.tsv
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from pathlib import Path

SHIFT_RE = re.compile(r"\[([^\]]*)\]")


def key(accession):
    """``sp|P0A9A6|FTSZ_ECOLI`` → ``P0A9A6`` (other accessions as they are)."""
    parts = accession.split("|")
    return parts[1] if len(parts) == 3 else accession


def as_float(text, default=math.inf):
    try:
        return float(text)
    except (TypeError, ValueError):
        return default


def sites(proteoform, first):
    """(first, last) protein residues (1-based) of each parenthesised range followed by a ``[shift]`` in a TopPIC
    proteoform string such as ``M.SKI(RLE)[+79.97]GL.R``; ``first`` is the PrSM's first residue."""
    body = proteoform.split(".", 1)[1].rsplit(".", 1)[0] if proteoform.count(".") >= 2 else proteoform
    out, pos, open_at, i = [], first, None, 0
    while i < len(body):
        c = body[i]
        if c == "(":
            open_at = pos
        elif c == ")":
            closed = (open_at, pos - 1)
            if body[i + 1 : i + 2] == "[" and open_at is not None:
                out.append(closed)
            open_at = None
        elif c == "[":
            i = body.index("]", i)
        elif c.isalpha():
            pos += 1
        i += 1
    return out


def read_rtsearch(path):
    rows = list(csv.DictReader(path.open(), delimiter="\t"))
    prsms = []
    for r in rows:
        if not r.get("proteins") or r.get("is_decoy", "").lower() in ("true", "1"):
            continue
        prsms.append({"scan": r["scan"], "proteins": r["proteins"].split(";"), "q": as_float(r.get("q_value")),
                      "first": int(float(r["proteoform_start"])), "last": int(float(r["proteoform_end"])),
                      "shift": as_float(r.get("mass_shift"), 0.0), "sites": rt_sites(r)})
    return prsms, len(rows), "shift_first" in (rows[0] if rows else {})


def rt_sites(row):
    """rtsearch's shift site range (``shift_first``/``shift_last``, 1-based in the protein), if it gave one."""
    a, b = as_float(row.get("shift_first"), 0.0), as_float(row.get("shift_last"), 0.0)
    return [(int(a), int(b))] if a > 0 and b >= a else []


def read_toppic(path):
    doc = json.loads(path.read_text())
    prsms = []
    for p in doc["prsms"]:
        if p["protein"].startswith("DECOY_"):
            continue
        prsms.append({"scan": str(p["scan"]), "proteins": [p["protein"]], "q": as_float(p.get("qvalue")),
                      "first": int(p["first"]), "last": int(p["last"]), "shift": sum(p.get("shifts", [])),
                      "sites": sites(p["proteoform"], int(p["first"])) if "proteoform" in p else None})
    return prsms, doc


def score(prsms, truth, q, seqs):
    kept = [p for p in prsms if p["q"] <= q and p["scan"] in truth]
    correct, forms, wrong, alias = [], set(), [], []
    loc = {"truth_shift": 0, "reported": 0, "localized": 0}
    by_type = {}
    for p in kept:
        t = truth[p["scan"]]
        length = t["last"] - t["first"] + 1
        overlap = min(p["last"], t["last"]) - max(p["first"], t["first"]) + 1
        text = (f"{p['scan']}: {p['proteins'][0]} {p['first']}-{p['last']} "
                f"(truth {t['accession']} {t['first']}-{t['last']})")
        if key(t["accession"]) not in {key(a) for a in p["proteins"]} or overlap < 0.5 * length:
            same = seqs.get(t["accession"], "")[p["first"] - 1 : p["last"]]
            if same and overlap >= 0.5 * length and any(seqs.get(a, "")[p["first"] - 1 : p["last"]] == same
                                                        for a in p["proteins"]):
                alias.append(text)  # another protein with the same residues there: indistinguishable
            else:
                wrong.append(text)
            continue
        correct.append(p)
        forms.add((t["accession"], t["first"], t["last"], t["nterm"], t["shift_kind"], t["shift_site"]))
        by_type[t["type"]] = by_type.get(t["type"], 0) + 1
        if t["shift_kind"] != "none":
            loc["truth_shift"] += 1
            if p["sites"]:
                loc["reported"] += 1
                loc["localized"] += any(a <= t["shift_site"] <= b for a, b in p["sites"])
    return {"prsms": len(kept), "correct": len(correct), "correct_proteoforms": len(forms),
            "same_sequence": len(alias), "wrong": len(wrong), "correct_by_type": dict(sorted(by_type.items())),
            "localization": loc, "wrong_prsms": wrong, "same_sequence_prsms": alias}


def read_fasta(path):
    seqs, name = {}, None
    for line in path.read_text().splitlines():
        if line.startswith(">"):
            name = line[1:].split(None, 1)[0] if line[1:].strip() else ""
            seqs[name] = ""
        elif name is not None:
            seqs[name] += line.strip()
    return seqs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--truth", type=Path, required=True, help="truth.json of bench/topdown_simulate.py")
    ap.add_argument("--rtsearch", type=Path, help="rtsearch results TSV")
    ap.add_argument("--toppic", type=Path, help="JSON of bench/toppic_run.py --json")
    ap.add_argument("--fasta", type=Path, help="the simulation's FASTA (default: the .fasta beside --truth)")
    ap.add_argument("--q", type=float, default=0.01, help="q-value cutoff")
    ap.add_argument("--json", type=Path, help="write the summary here")
    args = ap.parse_args()
    if not (args.rtsearch or args.toppic):
        ap.error("give --rtsearch and/or --toppic")
    truth = json.loads(args.truth.read_text())
    fasta = args.fasta or next(iter(sorted(args.truth.parent.glob("*.fasta"))), None)
    seqs = read_fasta(fasta) if fasta else {}
    summary = {"truth": str(args.truth), "spectra": len(truth), "q": args.q, "engines": {}}
    if args.rtsearch:
        prsms, searched, localizes = read_rtsearch(args.rtsearch)
        res = score(prsms, truth, args.q, seqs)
        res["searched"] = searched
        if not localizes:
            res["localization_note"] = "not reported (no shift_first/shift_last columns)"
        summary["engines"]["rtsearch"] = res
    if args.toppic:
        prsms, doc = read_toppic(args.toppic)
        res = score(prsms, truth, args.q, seqs)
        res.update(searched=len(truth), wall_s=doc.get("wall_s"))
        if any(p["sites"] is None for p in prsms):
            res["localization_note"] = "not available (no proteoform string in the JSON)"
        summary["engines"]["toppic"] = res
    print(f"{len(truth)} simulated spectra; target PrSMs at q <= {args.q}")
    print(f"{'engine':<9} {'searched':>8} {'PrSMs':>6} {'correct':>8} {'forms':>6} {'same-seq':>8} {'wrong':>6} "
          f"{'shifted':>8} {'sited':>6} {'localized':>10}  correct by type")
    for name, r in summary["engines"].items():
        loc = r["localization"]
        sited, shown = ("n/a", "n/a") if "localization_note" in r else (loc["reported"], loc["localized"])
        print(f"{name:<9} {r['searched']:>8} {r['prsms']:>6} {r['correct']:>8} {r['correct_proteoforms']:>6} "
              f"{r['same_sequence']:>8} {r['wrong']:>6} {loc['truth_shift']:>8} {sited:>6} {shown:>10}  "
              f"{r['correct_by_type']}")
    for name, r in summary["engines"].items():
        if "localization_note" in r:
            print(f"{name}: localization {r['localization_note']}")
        for w in r["same_sequence_prsms"]:
            print(f"{name} same-sequence protein {w}")
        for w in r["wrong_prsms"]:
            print(f"{name} wrong PrSM {w}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
        print("wrote", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
