"""Read an mzIdentML file with pyOpenMS (run in the interop environment, where pyopenms is installed) and print, as
JSON, what OpenMS takes from it: the search parameters (enzyme, missed cleavages, tolerances, modifications, database)
and each peptide hit's sequence, charge, score and protein positions. Usage: read_mzid_openms.py FILE.mzid"""

import json
import sys

import pyopenms as oms

proteins: list = []
peptides = oms.PeptideIdentificationList()
oms.MzIdentMLFile().load(sys.argv[1], proteins, peptides)
(run,) = proteins
p = run.getSearchParameters()
hits = []
for pid in peptides:
    for h in pid.getHits():
        hits.append({"sequence": h.getSequence().toString(), "charge": h.getCharge(), "score": h.getScore(),
                     "evidence": [{"accession": e.getProteinAccession(), "start": e.getStart(), "end": e.getEnd(),
                                   "before": e.getAABefore(), "after": e.getAAAfter()}
                                  for e in h.getPeptideEvidences()]})  # fmt: skip
print(json.dumps({
    "enzyme": p.digestion_enzyme.getName(), "missed_cleavages": p.missed_cleavages,
    "precursor_tolerance": p.precursor_mass_tolerance, "precursor_ppm": p.precursor_mass_tolerance_ppm,
    "fragment_tolerance": p.fragment_mass_tolerance, "fragment_ppm": p.fragment_mass_tolerance_ppm,
    "fixed": [m for m in p.fixed_modifications], "variable": [m for m in p.variable_modifications],
    "db": p.db, "engine": run.getSearchEngine(), "hits": hits,
}))
