"""The daemon serving a proteoform database at a top-down instrument's pace, measured by the shared client.

Builds the FLASHApp E. coli proteoform database, writes the run's deconvoluted MS2 spectra as MGF the way they
travel on the wire (charge 1, each mass plus a proton: `rtsearch.types.DeconvolutedSpectrum.as_spectrum`), then
on free loopback ports runs ``echo_floor.py`` and ``rtsearch serve --proteoforms`` each under ``rt_load.py`` at
``--rates`` (default 10/s, a top-down instrument's rate) for ``--seconds``. Prints and writes (``--json``) every
``rt_load.py`` line, tagged ``floor`` or ``rtsearch``, with the daemon's backend.

    python3 bench/topdown_daemon.py --data .gpudata/data --tools .gpudata/tools [--rates 10,20] [--seconds 30]
        [--serve-args "--backend cupy"] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from bench.rtload_bench import rt_load  # noqa: E402
from bench.serving import Served, echo_floor, write_mgf  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--tools", type=Path, required=True, help="a copy of ../shared/tools (rt_load.py, echo_floor.py)")
    p.add_argument("--rates", default="10")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--serve-args", default="", help="extra arguments of rtsearch serve")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    folder = args.data / "topdown-flashapp-ecoli"
    lines: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        mgf = tmp / "flash_ms2.mgf"
        n = write_mgf(read_spectra(folder / "toppic_ms2.msalign"), mgf)  # deconvoluted: charge 1, as on the wire
        print(f"{n} spectra as charge-1 MGF", flush=True)
        fasta = folder / "example_database.fasta"
        subprocess.run([sys.executable, "-m", "rtsearch.cli", "proteoforms", "build", "--fasta", str(fasta), "--out",
                        str(tmp / "ecoli.pf")], check=True)  # fmt: skip

        def phase(tag: str, ep: tuple[str, str]) -> None:
            for line in rt_load(args.tools, mgf, *ep, "--rates", args.rates, "--seconds", str(args.seconds),
                                "--drain", "60", "--tag", tag):  # fmt: skip
                line["phase"] = tag
                lines.append(line)
                print(json.dumps(line), flush=True)

        with echo_floor(args.tools) as ep:
            phase("floor", ep)
        t0 = time.perf_counter()
        with Served(tmp / "ecoli.pf", tmp / "results", args.serve_args.split(), tmp, kind="--proteoforms") as served:
            print(f"daemon ready in {time.perf_counter() - t0:.1f} s", flush=True)
            phase("rtsearch", (served.spectra, served.results))
    if args.json:
        args.json.write_text(json.dumps(lines, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
