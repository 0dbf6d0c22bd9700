"""The daemon's own cost per spectrum, without the engine: intake, batching, results, publishing.

The daemon runs here with an engine whose ``score`` returns at once (canned best matches
for real index peptides, so results carry real ProForma strings, proteins and running
q-values); ``rtsearch-sim load`` feeds it from another process and collects the results.
What is left is the shell's per-spectrum Python — the ceiling on throughput whatever the
GPU does. Reports the collector's figures and this process's CPU seconds per spectrum.

    python bench/shell_probe.py --rates 2000,5000,10000 --seconds 5 [--profile out.html]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulators"))

from rtsearch.batch import SpectraBatch  # noqa: E402
from rtsearch.cli.demo import RUN, bundled, cached_index, default_cache  # noqa: E402
from rtsearch.config import SearchConfig, ServeConfig  # noqa: E402
from rtsearch.io.spectra import read_spectra  # noqa: E402
from rtsearch.matches import BestMatches, ScoredBatch  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.scoring.database.engine import Engine  # noqa: E402
from rtsearch.scoring.database.features import FEATURES  # noqa: E402
from rtsearch.search.database import DatabaseTarget  # noqa: E402
from rtsearch.serve.daemon import Daemon  # noqa: E402


class InstantEngine(Engine):
    """An `Engine` whose scoring is canned: seeded random peptides and features, no search."""

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.rng = np.random.default_rng(0)

    def score(self, spectra: SpectraBatch) -> ScoredBatch:
        n = len(spectra)
        rng = self.rng
        pep = rng.integers(0, len(self.peptide_mass), n)
        feats = rng.normal(size=(n, len(FEATURES)))
        feats[:, FEATURES.index("hyperscore")] += 3 * (~np.asarray(self.index.is_decoy(pep), dtype=bool))
        best = BestMatches(pep, np.full(n, 2), rng.uniform(400, 1200, n), rng.normal(size=n),
                           rng.integers(3, 30, n), feats)  # fmt: skip
        return ScoredBatch(run=list(spectra.run), scan=spectra.scan, precursor_mz=spectra.precursor_mz,
                           rt=np.zeros(n), best=best, reason=[""] * n)  # fmt: skip


def instant_target(cache: Path | None = None) -> DatabaseTarget:
    """The demo index's target scored by `InstantEngine` (the probes' engine: the daemon's own costs alone)."""
    index, _ = cached_index(cache or default_cache())
    return DatabaseTarget(index, SearchConfig(), engine=InstantEngine(index, SearchConfig(), get_backend("numpy")))


def demo_batch(size: int) -> SpectraBatch:
    """``size`` spectra of the bundled demo run, cycled."""
    spectra = list(read_spectra(bundled(RUN)))
    return SpectraBatch.of((spectra * (size // len(spectra) + 1))[:size])


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process, by thread name (Linux /proc)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = names.get(int(task.name)) or (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


RUN_SIZE = 50_000  # spectra per run of the load (--run-size)


async def phase(
    daemon: Daemon, run: str, rate: float, seconds: float, tmp: Path, run_size: int = RUN_SIZE
) -> dict[str, object]:
    out = tmp / f"sim-{rate:g}.json"
    cmd = [
        sys.executable, "-m", "rtsearch_sim.cli", "load", run, "--mode", "push", "--endpoint", daemon.endpoints.spectra,
        "--collect", daemon.endpoints.results, "--rate", str(rate), "--count", str(int(rate * seconds)),
        "--run-size", str(run_size), "--json", str(out), "--wait", "10",
    ]  # fmt: skip
    cpu0, wall0, threads0 = time.process_time(), time.perf_counter(), thread_cpu()
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await proc.communicate()
    cpu = time.process_time() - cpu0
    threads = {k: v - threads0.get(k, 0.0) for k, v in thread_cpu().items()}
    if not out.is_file():
        raise RuntimeError(stderr.decode()[-2000:])
    rep = json.loads(out.read_text())
    rep["daemon_cpu_us_per_spectrum"] = cpu / max(rep["answered"], 1) * 1e6
    print(f"{rate:>8,.0f}/s: {stdout.decode().strip()}\n           daemon CPU {rep['daemon_cpu_us_per_spectrum']:.1f} "
          f"µs/spectrum over the phase ({cpu:.2f} s CPU in {time.perf_counter() - wall0:.1f} s); by thread, "
          "µs/spectrum: " + ", ".join(f"{k} {v / max(rep['answered'], 1) * 1e6:.0f}"
                                     for k, v in sorted(threads.items(), key=lambda kv: -kv[1]) if v > 0.01),
          flush=True)  # fmt: skip
    rep["rss_mb"] = rss_mb()
    print("           resident MB: " + ", ".join(f"{k} {v:.0f}" for k, v in rep["rss_mb"].items()), flush=True)
    return rep


def spawned_children() -> list[str]:
    """Pids of the processes under this one (the daemon's intake and refit processes, forked by its fork server,
    and that server)."""
    from bench.serving import process_tree

    return [str(pid) for pid in process_tree(os.getpid())[1:]]


def rss_mb() -> dict[str, float]:
    """Resident memory of this process and of its spawned children (intake, refits), MB."""

    def vmrss(pid: str) -> float:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    return {"daemon": vmrss("self"), **{f"child {pid}": vmrss(pid) for pid in spawned_children()}}


async def main_async(args: argparse.Namespace) -> None:
    engine = instant_target(Path(args.cache) if args.cache else None)
    run = str(bundled("Ecoli_MS2_small.mzML"))
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        cfg = ServeConfig(spectra="tcp://127.0.0.1:*", spectra_mode="pull", results="tcp://127.0.0.1:*",
                          metrics_port=0, results_dir=str(tmp / "out"))  # fmt: skip
        daemon = Daemon(engine, cfg)
        stop = asyncio.Event()
        task = asyncio.create_task(daemon.run(stop))
        await daemon.ready.wait()
        prof: Any = None
        if args.cprofile:
            import cProfile

            prof = cProfile.Profile()  # the event loop's thread only
            prof.enable()
        elif args.profile:
            from pyinstrument import Profiler

            prof = Profiler(async_mode="disabled")
            prof.start()
        try:
            for rate in (float(r) for r in args.rates.split(",")):
                await phase(daemon, run, rate, args.seconds, tmp, args.run_size)
        finally:
            if args.cprofile:
                import pstats

                prof.disable()
                pstats.Stats(prof).sort_stats(args.cprofile_sort).print_stats(args.cprofile)
            elif prof is not None:
                prof.stop()
                Path(args.profile).write_text(prof.output_html())
                print(prof.output_text(show_all=False)[:args.profile_chars])
            stop.set()
            await task


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="2000,5000,10000")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--cache", help="index cache folder (default: the demo's)")
    ap.add_argument("--run-size", type=int, default=RUN_SIZE, help="spectra per run of the load")
    ap.add_argument("--profile", help="write a pyinstrument HTML profile of the daemon process here")
    ap.add_argument("--profile-chars", type=int, default=6000)
    ap.add_argument("--cprofile", type=int, default=0, metavar="N",
                    help="cProfile the event loop's thread and print its N costliest functions")
    ap.add_argument("--cprofile-sort", default="tottime", choices=("tottime", "cumulative"))
    asyncio.run(main_async(ap.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
