"""Read an MSP library with mzspeclib (run by the interop environment's Python, beside psm_utils).

    python read_msp.py FILE   ->  one JSON list on stdout: each entry's ProForma peptidoform, charge and peak count
"""

from __future__ import annotations

import json
import sys
import warnings

from mzspeclib import SpectrumLibrary

warnings.simplefilter("ignore")  # mzspeclib warns of every modification name it passes on verbatim
out = []
for spectrum in SpectrumLibrary(filename=sys.argv[1], format="msp"):
    (analyte,) = spectrum.analytes.values()
    peptide = analyte.get_attribute("MS:1003270|proforma peptidoform ion notation")
    out.append([str(peptide), spectrum.precursor_charge, len(spectrum.peak_list)])
json.dump(out, sys.stdout)
