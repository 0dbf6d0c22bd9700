"""One hostile message of each class (`tests/hostile.py`) against a fresh `rtsearch serve` of any checkout.

For each class: start the checkout's daemon (``PYTHONPATH`` set to it, so an older checkout can be
compared with this one on the same machine), send ``run.start``, the hostile message, then one valid
spectrum, and say whether the daemon is still up, answered the valid spectrum, and answered the
hostile one exactly when it names a spectrum. Prints a line a class, then a JSON summary.

    python3 bench/hostile_classes.py --code /path/to/checkout --index ecoli.idx
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from rtsearch.cli.demo import RUN, bundled  # noqa: E402
from rtsearch.wire import encode_run_start, encode_spectrum  # noqa: E402
from rtsearch_sim.collector import Collector  # noqa: E402
from rtsearch_sim.replay import Sender, SendError, load_run  # noqa: E402
from tests.hostile import _classes  # noqa: E402

CLI = "import sys; from rtsearch.cli import main; sys.exit(main())"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one(code: Path, index: Path, make: Any, spectrum: Any, out: Path) -> tuple[bool, str]:
    sp_port, res_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": f"{code}:{code / 'simulators'}", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", "--index", str(index), "--spectra", f"tcp://127.0.0.1:{sp_port}",
         "--spectra-mode", "pull", "--results", f"tcp://127.0.0.1:{res_port}", "--metrics-port", "0",
         "--backend", "numpy", "--results-dir", str(out)], env=env, stderr=subprocess.PIPE, text=True,
        cwd=out.parent,  # not a checkout: `python -c` puts the working folder first on sys.path
    )  # fmt: skip
    assert proc.stderr is not None
    t0, log = time.monotonic(), ""
    while " ready: " not in log and time.monotonic() - t0 < 120 and proc.poll() is None:
        log += proc.stderr.readline()
    col = Collector(f"tcp://127.0.0.1:{res_port}").start()
    hostile = make(spectrum, "r", 5, random.Random(0))
    good = encode_spectrum(dataclasses.replace(spectrum, run="r", scan=99))
    try:
        with Sender(f"tcp://127.0.0.1:{sp_port}", mode="push", wait_s=3) as s:
            s.send(encode_run_start("r"))
            s.send(hostile.frames)
            time.sleep(0.5)
            s.send(good)
    except SendError:
        pass  # the daemon is gone
    col.wait(2 if hostile.answer else 1, idle_s=3, timeout_s=10)
    col.stop()
    got = collections.Counter(r["scan"] for r in col.results())
    up = proc.poll() is None
    ok = up and got[99] == 1 and (got[hostile.answer[1]] == 1 if hostile.answer else sum(got.values()) == 1)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    return ok, "ok" if ok else f"FAIL: up={up} exit={proc.returncode if not up else None} answered={dict(got)}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--code", type=Path, default=ROOT, help="the checkout whose daemon is tried (default this one)")
    p.add_argument("--index", type=Path, required=True, help="an index folder (rtsearch index build)")
    args = p.parse_args()
    spectra = [s for s in load_run(bundled(RUN)) if s.ms_level == 2]
    sp = dataclasses.replace(spectra[0], mz=spectra[0].mz[:40], intensity=spectra[0].intensity[:40])
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k, (kind, (_, make)) in enumerate(_classes().items()):
            ok, verdict = one(args.code.resolve(), args.index, make, sp, Path(tmp) / str(k))
            results[kind] = ok
            print(f"{kind:38s} {verdict}", flush=True)
    print(json.dumps({"code": str(args.code), "classes": len(results), "ok": sum(results.values()),
                      "failed": [k for k, v in results.items() if not v]}))  # fmt: skip
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
