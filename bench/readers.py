"""rtsearch's spectrum readers against pyteomics' (why they are written by hand: the speed measured here).

Writes the dev runs' MS2 spectra looped into one MGF of ``--spectra`` (`bench.harness.looped_spectra`), gzips a copy,
loops ``yeast-small/demo.ms2`` to as many spectra and writes ``SmallCalibratible_Yeast.mzML``'s spectra looped
to as many as mzXML (`tests/mzxml_cases.py`); then times, in this process one after the other, reading every
spectrum with `rtsearch.io.spectra.read_spectra` (the bulk readers) and with pyteomics' MGF reader (what rtsearch
used before), MS2 and mzXML readers, and every spectrum of two real mzML runs (BSA1, gzipped, and the yeast run, MS1
and MS2) with `rtsearch.io.mzml` and `pyteomics.mzml`, best of ``--repeat``; prints one JSON line.

    python3 bench/readers.py --data ../shared/data [--spectra 50000] [--repeat 3] [--json readers.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyteomics import mgf, ms2, mzml, mzxml  # noqa: E402

from bench.harness import emit, looped_spectra, write_mgf  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from tests.mzxml_cases import write_mzxml  # noqa: E402


def _best(fn, repeat: int) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        best = min(best, time.perf_counter() - t0)
    return best, n


def _pyteomics_mzml(path: Path) -> int:
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as fh:
        return sum(1 for _ in mzml.read(fh))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--spectra", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_s:
        path = Path(tmp_s) / "bulk.mgf"
        write_mgf(looped_spectra(args.data, args.spectra), path)
        gz = path.with_suffix(".mgf.gz")
        with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst)
        res: dict[str, object] = {"spectra": args.spectra, "mgf_mb": round(path.stat().st_size / 1e6, 1)}
        secs, n = _best(lambda: sum(1 for _ in read_spectra(path)), args.repeat)
        res["bulk_s"], res["bulk_spectra"] = round(secs, 3), n
        secs, _ = _best(lambda: sum(1 for _ in read_spectra(gz)), args.repeat)
        res["bulk_gz_s"] = round(secs, 3)
        secs, n = _best(lambda: sum(1 for _ in mgf.read(str(path), convert_arrays=1, read_charges=False)),
                        args.repeat)  # fmt: skip
        res["pyteomics_s"], res["pyteomics_spectra"] = round(secs, 3), n
        res["speedup"] = round(res["pyteomics_s"] / res["bulk_s"], 2)  # type: ignore[operator]
        looped = Path(tmp_s) / "looped.ms2"
        head, body = (args.data / "yeast-small" / "demo.ms2").read_text().split("\nS", 1)
        looped.write_text(head + "".join("\nS" + body.rstrip("\n") for _ in range(args.spectra // 150)) + "\n")
        res["ms2_mb"] = round(looped.stat().st_size / 1e6, 1)
        secs, res["ms2_spectra"] = _best(lambda: sum(1 for _ in read_spectra(looped)), args.repeat)
        res["ms2_bulk_s"] = round(secs, 3)
        secs, _ = _best(lambda: sum(1 for _ in ms2.read(str(looped))), args.repeat)
        res["ms2_pyteomics_s"] = round(secs, 3)
        yeast = list(read_spectra(args.data / "yeast-small" / "SmallCalibratible_Yeast.mzML", ms_levels=(1, 2)))
        looped_xml = Path(tmp_s) / "looped.mzXML"
        write_mzxml([dataclasses.replace(yeast[i % len(yeast)], scan=i + 1) for i in range(args.spectra)], looped_xml)
        res["mzxml_mb"] = round(looped_xml.stat().st_size / 1e6, 1)
        both = (1, 2)
        ours = lambda: sum(1 for _ in read_spectra(looped_xml, ms_levels=both))  # noqa: E731
        secs, res["mzxml_spectra"] = _best(ours, args.repeat)
        res["mzxml_ours_s"] = round(secs, 3)
        secs, _ = _best(lambda: sum(1 for _ in mzxml.read(str(looped_xml))), args.repeat)
        res["mzxml_pyteomics_s"] = round(secs, 3)
        for name, mzml_path in (("bsa1", args.data / "bsa-orbitrapxl" / "BSA1.mzML.gz"),
                                ("yeast", args.data / "yeast-small" / "SmallCalibratible_Yeast.mzML")):
            ours = lambda p=mzml_path: sum(1 for _ in read_spectra(p, ms_levels=both))  # noqa: E731
            secs, res[f"mzml_{name}_spectra"] = _best(ours, args.repeat)
            res[f"mzml_{name}_ours_s"] = round(secs, 3)
            secs, _ = _best(lambda p=mzml_path: _pyteomics_mzml(p), args.repeat)
            res[f"mzml_{name}_pyteomics_s"] = round(secs, 3)
        res["bulk_mb_per_s"] = round(path.stat().st_size / 1e6 / res["bulk_s"], 1)  # type: ignore[operator]
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
