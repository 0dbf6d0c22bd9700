"""Read PSM files with psm_utils (run by the interop environment's Python: psm_utils pins pyteomics < 5).

    python read_psms.py FILETYPE FILE   ->  one JSON list on stdout: each PSM's fields the test compares
"""

from __future__ import annotations

import json
import sys
import warnings

from psm_utils.io import read_file

warnings.simplefilter("ignore")
filetype, path = sys.argv[1], sys.argv[2]
kwargs = {"score_column": "hyperscore", "retention_time_column": "rt"} if filetype == "percolator" else {}
out = []
for p in read_file(path, filetype=filetype, **kwargs):
    out.append({
        "spectrum_id": str(p.spectrum_id), "run": p.run, "peptide": p.peptidoform.modified_sequence,
        "proforma": p.peptidoform.proforma, "charge": p.peptidoform.precursor_charge, "is_decoy": p.is_decoy,
        "score": p.score, "qvalue": None if p.qvalue is None else float(p.qvalue),
        "pep": None if p.pep is None else float(p.pep),
        "rt": p.retention_time, "proteins": p.protein_list, "mass": p.peptidoform.theoretical_mass,
        "features": len(p.rescoring_features or {}), "rank": p.rank,
    })
json.dump(out, sys.stdout)
