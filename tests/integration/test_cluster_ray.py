"""Scale-out on Ray (`rtsearch.cluster.placement.RayPlacement`): the daemon's 3 NumPy workers as actors of a local
Ray cluster give the results file one engine gives (`tests.integration.test_cluster.same_files`), and a worker
killed mid-run under the shared client (`rt_load.py`) loses nothing and its restarted process takes its piece back.
(A module runs on one xdist worker, `--dist loadscope`: one Ray cluster for both; the process-placed cluster tests
are a module of their own, on another worker.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.cluster.serve import target_bytes
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from tests.devruns import DEV_RUNS
from tests.integration.test_cluster import same_files
from tests.streaming import ServeProcess, free_port


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster for this module's daemons (each places its workers there as actors)."""
    import ray  # the [cluster] extra: scripts/test installs it

    ctx = ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ctx.address_info["gcs_address"]
    ray.shutdown()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_three_ray_workers_give_one_engines_results(data, dev_indexes, tmp_path, ray_cluster):
    (dev,) = [d for d in DEV_RUNS if d.name == "Ecoli_MS2_small"]
    await same_files(dev, data, dev_indexes, tmp_path, "numpy", 3, placement="ray", modes=("partition",))


def _mgf(path: Path) -> int:
    """The bundled run's MS2 spectra with one known charge, as MGF (what rt_load.py reads); how many."""
    n = 0
    with open(path, "w") as fh:
        for sp in read_spectra(bundled(RUN)):
            if len(sp.charges) != 1 or sp.problem:
                continue
            n += 1
            fh.write(f"BEGIN IONS\nTITLE=x.{sp.scan}\nSCANS={sp.scan}\nPEPMASS={sp.precursor_mz!r}\n"
                     f"CHARGE={sp.charges[0]}+\nRTINSECONDS={sp.rt!r}\n")  # fmt: skip
            fh.writelines(f"{m!r} {i!r}\n" for m, i in zip(sp.mz.tolist(), sp.intensity.tolist(), strict=True))
            fh.write("END IONS\n")
    return n


@pytest.mark.slow
def test_a_ray_worker_killed_mid_run_loses_nothing(demo_index, shared_tools, tmp_path, ray_cluster):
    mgf = tmp_path / "run.mgf"
    _mgf(mgf)
    # each worker holds only its slice (memory for 60 % of the target): the killed one's piece waits for its restart
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    toml = tmp_path / "sliced.toml"
    toml.write_text(bundled(TOML).read_text() + f"\n[serve]\nworker_memory_gb = {0.6 * target_bytes(target) / 1e9!r}\n")
    sp, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    daemon = ServeProcess(["--index", str(demo_index.folder), "--config", str(toml), "--backend",
                           "numpy", "--spectra", sp, "--spectra-mode", "pull", "--results", rp, "--metrics-port", "0",
                           "--results-dir", str(tmp_path / "res"), "--budget-ms", "20000", "--intakes", "1",
                           "--cluster", "3", "--cluster-mode", "partition", "--placement", "ray",
                           "--ray-address", ray_cluster])  # the module's Ray cluster, joined  # fmt: skip
    try:
        assert daemon.wait_for(" ready: ", 300), daemon.log
        up = {m[0]: int(m[1]) for m in re.findall(r"cluster: (w\d) up \(pid (\d+)", daemon.log)}
        assert re.search(r"each worker holds precursor masses \[\(-inf, [\d.]+\), \([\d.]+, [\d.]+\), \([\d.]+, inf\)",
                         daemon.log), daemon.log  # slices, not the whole target
        assert sorted(up) == ["w0", "w1", "w2"], daemon.log
        load = subprocess.Popen(
            [sys.executable, str(shared_tools / "rt_load.py"), str(mgf), "--spectra", sp, "--results", rp, "--rates",
             "150", "--seconds", "8", "--senders", "1", "--drain", "40", "--tag", "killed"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(3.0)
        os.kill(up["w1"], signal.SIGKILL)  # mid-run; Ray restarts the actor's process
        out, err = load.communicate(timeout=240)
        assert load.returncode == 0, err[-2000:]
        # noticed: silent for `DEAD_AFTER_S`, or back first (Ray restarts a process within that), batches sent again
        # (waited for as either: waiting out "silent" when it came back first held the test 30 s)
        assert daemon.wait_for(("cluster: w1 silent", "cluster: w1 back"), 60), daemon.log
        assert daemon.wait_for("cluster: w1 up (pid", 120, count=2), daemon.log[-3000:]
    finally:
        daemon.proc.send_signal(signal.SIGINT)
        daemon.proc.wait(120)
    (report,) = [json.loads(x) for x in out.splitlines() if '"offered_hz"' in x]
    print(f"\nrt_load with w1 killed at 3 s: {report}")
    assert report["sent"] > 0 and report["lost"] == 0 and report["duplicates"] == 0, report
    assert report["answered"] == report["sent"]
    pids = [int(p) for p in re.findall(r"cluster: w1 up \(pid (\d+)", daemon.log)]
    assert len(pids) == 2 and pids[1] != up["w1"], daemon.log[-3000:]
    # the restarted w1 holds its piece again, in the door's last word (whether the run still had spectra for it
    # once it was back is the machine's pace)
    (back,) = re.findall(r"cluster: w1 \(piece 1, pid (\d+)\): (\d+) spectra", daemon.log)
    assert int(back[0]) == pids[1], daemon.log[-3000:]
