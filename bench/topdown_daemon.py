"""The daemon serving a proteoform database at a top-down instrument's pace, measured by the shared client.

Builds the FLASHApp E. coli proteoform database, writes the run's deconvoluted MS2 spectra as MGF the way they
travel on the wire (charge 1, each mass plus a proton: `rtsearch.types.DeconvolutedSpectrum.as_spectrum`), then
on free loopback ports runs ``echo_floor.py`` and ``rtsearch serve --proteoforms`` each under ``rt_load.py`` at
``--rates`` (default 10/s, a top-down instrument's rate) for ``--seconds``. Prints and writes (``--json``) every
``rt_load.py`` line, tagged ``floor`` or ``rtsearch``, with the daemon's backend.

``--configs 1,2`` (issue 21) serves the same database again as the front door of N local cluster workers each
(replicate; ``--gpus-per-worker 1``: worker k on GPU k), tagged ``cluster N``, with each worker's spectra (and
with ``--kill-rate``, a run with worker w0 SIGKILLed a third of the way in): top-down
scoring is GPU-bound (tens of spectra a second a GPU), so offered far over capacity with ``--budget-ms``, the
spectra scored a second ((answered - shed) / seconds) are a configuration's capacity.

    python3 bench/topdown_daemon.py --data .gpudata/data --tools .gpudata/tools [--rates 10,20] [--seconds 30]
        [--serve-args "--backend cupy"] [--configs 1,2 --gpus-per-worker 1 --budget-ms 2000] [--json out.json]
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

from bench.cluster_bench import killed  # noqa: E402
from bench.cluster_reading import by_worker, summed, worker_pids  # noqa: E402
from bench.rtload_bench import rt_load  # noqa: E402
from bench.serving import Served, echo_floor, write_mgf  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from tests.streaming import scrape  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--tools", type=Path, required=True, help="a copy of ../shared/tools (rt_load.py, echo_floor.py)")
    p.add_argument("--rates", default="10")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--serve-args", default="", help="extra arguments of rtsearch serve")
    p.add_argument("--configs", default="", help="cluster sizes to serve through as well, e.g. 1,2 (replicate)")
    p.add_argument("--gpus-per-worker", type=float, default=0.0)
    p.add_argument("--budget-ms", type=float, default=0.0, help="the daemon's and rt_load's budget (0: the default)")
    p.add_argument("--senders", type=int, default=1)
    p.add_argument("--kill-rate", type=float, default=0.0, help="N > 1: rt_load at this rate, w0 SIGKILLed mid-run")
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

        def phase(tag: str, ep: tuple[str, str], rates: str = args.rates) -> None:
            budget = ["--budget-ms", str(args.budget_ms)] if args.budget_ms and tag != "floor" else []
            for line in rt_load(args.tools, mgf, *ep, "--rates", rates, "--seconds", str(args.seconds),
                                "--drain", "60", "--senders", str(args.senders), *budget, "--tag", tag):  # fmt: skip
                shed = line.get("statuses", {}).get("shed", 0)
                line.update(phase=tag, scored_per_s=round((line["answered"] - shed) / args.seconds, 1))
                lines.append(line)
                print(json.dumps(line), flush=True)

        with echo_floor(args.tools) as ep:
            phase("floor", ep, "10")
        for n in [0] + [int(x) for x in args.configs.split(",") if x]:
            extra = ["--budget-ms", str(args.budget_ms)] if args.budget_ms else []  # the daemon's, the door's too
            extra += [] if not n else ["--cluster", str(n), "--cluster-mode", "replicate", "--placement", "local",
                                       "--config", str(_toml(tmp, args.gpus_per_worker))]  # fmt: skip
            t0 = time.perf_counter()
            with Served(tmp / "ecoli.pf", tmp / f"results{n}", [*args.serve_args.split(), *extra], tmp,
                        kind="--proteoforms") as served:  # fmt: skip
                print(f"daemon ready in {time.perf_counter() - t0:.1f} s", flush=True)
                phase(f"cluster {n}" if n else "rtsearch", (served.spectra, served.results))
                if n:
                    per = by_worker(summed(scrape(served.port)), "spectra")
                    lines.append({"phase": f"workers {n}", "spectra": per})
                    print(json.dumps(lines[-1]), flush=True)
                if n > 1 and args.kill_rate:
                    lines.append(killed(args, mgf, served, f"cluster {n}", worker_pids("".join(served.log))))
                    print(json.dumps(lines[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(lines, indent=1))
    return 0


def _toml(tmp: Path, gpus: float) -> Path:
    path = tmp / "cluster.toml"
    path.write_text(f"[serve]\ngpus_per_worker = {gpus}\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
