"""Spectra written as mzXML the way older converters wrote it (MS2 scans nested in the MS1 scan before them;
64-bit and 32-bit peaks, zlib-compressed or not, in turn): what the mzXML tests and `bench/readers.py` read."""

from __future__ import annotations

import base64
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rtsearch.types import Spectrum


def _peaks(sp: Spectrum, k: int) -> str:
    bits, zipped = (32, ">f4") if k % 2 else (64, ">f8"), k % 3 == 0
    pairs = np.empty(2 * sp.n_peaks, dtype=bits[1])
    pairs[0::2], pairs[1::2] = sp.mz, sp.intensity
    raw = pairs.tobytes()
    raw = zlib.compress(raw) if zipped else raw
    comp = 'compressionType="zlib" ' if zipped else ""
    return (f'<peaks precision="{bits[0]}" byteOrder="network" {comp}pairOrder="m/z-int">'
            f"{base64.b64encode(raw).decode()}</peaks>")  # fmt: skip


def write_mzxml(spectra: Sequence[Spectrum], path: Path) -> None:
    """MS1 scans holding the MS2 scans that follow them (nested, as older converters wrote)."""
    out, open_ms1 = ['<?xml version="1.0" encoding="ISO-8859-1"?>\n<mzXML xmlns="http://sashimi.sourceforge.net/'
                     'schema_revision/mzXML_3.2">\n<msRun>'], False  # fmt: skip
    for k, sp in enumerate(spectra):
        head = (f'<scan num="{sp.scan}" msLevel="{sp.ms_level}" peaksCount="{sp.n_peaks}" '
                f'retentionTime="PT{sp.rt!r}S">')  # fmt: skip
        if sp.ms_level == 1:
            if open_ms1:
                out.append("</scan>")
            out.append(head + _peaks(sp, k))
            open_ms1 = True
        else:
            z = f' precursorCharge="{sp.charges[0]}"' if sp.charges else ""
            prec = f'<precursorMz precursorIntensity="{sp.precursor_intensity!r}"{z}>{sp.precursor_mz!r}</precursorMz>'
            out.append(head + prec + _peaks(sp, k) + "</scan>")
    out.append("</scan>" if open_ms1 else "")
    out.append("</msRun>\n</mzXML>\n")
    path.write_text("\n".join(out))
