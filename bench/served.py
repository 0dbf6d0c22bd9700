"""The daemon under the shared client: ``rtsearch serve`` as a process, the echo floor, ``rt_load.py``, counters.

`Served` starts ``rtsearch serve --spectra-mode pull`` on free loopback ports with the code of a checkout
(``PYTHONPATH``), waits for its ready line (the metrics port), and stops it on exit; `echo_floor` runs the shared
echo service (``../shared/tools/echo_floor.py``: a Python service answering each message at once, the latency no
Python service on the machine beats) the same way; `rt_load` runs the shared, independent protocol-v1 client
(``../shared/tools/rt_load.py``) against either. `daemon_metrics` and `stage_means` read where a spectrum's time
went inside the daemon; `cpu_by_thread` and `memory_kb` read its processes from ``/proc``.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.harness import ROOT, code_env, free_port

# where a spectrum's time went inside the daemon, as each histogram's sum and count (`stage_means`)
STAGES = ("rtsearch_arrival_age_seconds", "rtsearch_intake_wait_seconds", "rtsearch_queue_wait_seconds",
          "rtsearch_engine_batch_seconds", "rtsearch_latency_seconds")  # fmt: skip
WATCHED = ("rtsearch_shed_total", "rtsearch_results_total", "rtsearch_worker_seconds_total",
           "rtsearch_batch_size_sum", "rtsearch_batch_size_count",
           *(f"{s}_{part}" for s in STAGES for part in ("sum", "count")))  # fmt: skip


def wait_ready(proc: subprocess.Popen[str], timeout: float, tail: collections.deque[str] | None = None) -> int:
    """Wait for the daemon's ready line; its metrics port (its last lines in the error when it exits first).
    Its later lines are read on (so its stderr never fills up), the last ones kept in ``tail`` when given."""
    assert proc.stderr is not None
    end = time.monotonic() + timeout
    said: list[str] = []
    alarms: list[str] = []  # every ERROR / WARNING / traceback line before it was ready (a lane's first error came
    while time.monotonic() < end:  # long before the last 20 lines: docs/history/RESULTS.md 2026-11-28 20:50)
        line = proc.stderr.readline()
        said = [*said[-20:], line] if line else said  # at its end "" comes back until it is seen to exit
        if any(w in line for w in (" ERROR ", " WARNING ", "Traceback", "Error:", "error:")) and len(alarms) < 50:
            alarms.append(line)
        if " ready: " in line:
            kept = tail if tail is not None else collections.deque(maxlen=1)
            kept.extend(said)
            threading.Thread(target=kept.extend, args=(proc.stderr,), daemon=True).start()
            return int(line.rsplit(":", 1)[1])
        if not line and proc.poll() is not None:
            first = "".join(x for x in alarms if x not in said)
            raise RuntimeError(f"rtsearch serve exited with {proc.returncode}:\n"
                               + (f"its errors and warnings before the last lines:\n{first}" if first else "")
                               + "".join(said))  # fmt: skip
    raise RuntimeError("rtsearch serve did not become ready")


def daemon_metrics(port: int) -> dict[str, float]:
    """The daemon's counters that say where overload went (cumulative; shed by reason, worker stages)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError as e:
        return {"error": str(e)}  # type: ignore[dict-item]
    out = {}
    for line in text.splitlines():
        if line.startswith(WATCHED):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def metric_total(metrics: dict[str, float], name: str) -> float:
    """A `daemon_metrics` reading's ``name`` summed over its series (every label: a lanes' front has one a lane)."""
    return sum(v for k, v in metrics.items() if k.split("{")[0] == name)


def stage_means(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Each `STAGES` histogram's mean over what was observed between two `daemon_metrics` readings, in ms, summed
    over the lanes' series: how long a spectrum was old on arrival, waited for the daemon to take it, waited in the
    batcher, how long a batch was scored, and receipt to publication (the daemon's latency)."""
    def since(name: str) -> float:
        return metric_total(after, name) - metric_total(before, name)

    out = {}
    for stage in STAGES:
        n = since(f"{stage}_count")
        if n > 0:
            mean = since(f"{stage}_sum") / n
            out[stage.removeprefix("rtsearch_").removesuffix("_seconds")] = round(1e3 * mean, 3)
    return out


def _ticks(stat: str) -> int:
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15 of proc(5))


def host_ticks(stat: str = "/proc/stat") -> tuple[int, int]:
    """The host's CPU time so far, in clock ticks summed over its CPUs: (busy, all). Busy is user, nice, system,
    irq, softirq and steal; the rest is idle and iowait (proc(5), the ``cpu`` line)."""
    fields = [int(v) for v in Path(stat).read_text().split("\n", 1)[0].split()[1:9]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def busy_cores(before: tuple[int, int], after: tuple[int, int], cpus: int | None = None) -> float:
    """Cores the host kept busy on average between two `host_ticks` readings (of ``cpus``, default all)."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return round(busy / total * (cpus or os.cpu_count() or 1), 2) if total > 0 else 0.0


def processes() -> dict[int, tuple[int, str]]:
    """Every process of this host now: pid → (parent pid, name as it named itself: `name_os_thread`)."""
    out: dict[int, tuple[int, str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            out[int(stat.parent.name)] = (int(text[text.rindex(")") + 2 :].split()[1]),
                                          text[text.index("(") + 1 : text.rindex(")")])  # fmt: skip
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return out


def memory_kb(pid: int) -> dict[str, int]:
    """``Rss``, ``Pss`` and ``Pss_Anon`` (the heap's part: pages of a mapped file, such as an index opened read-only,
    count in PSS as they are touched, and are not a leak) of process ``pid`` in kB (empty when it is gone). Read
    from ``/proc``: psutil's ``memory_full_info`` has no ``Pss_Anon``."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss", "Pss_Anon"):
            out[key.lower()] = int(rest.split()[0])
    return out


def process_tree(pid: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """``pid`` and every process under it, breadth first (each process's children after it); ``table``: `processes`
    (read now when not given)."""
    table = processes() if table is None else table
    procs, k = [pid], 0
    while k < len(procs):
        procs += [c for c, (parent, _) in table.items() if parent == procs[k]]
        k += 1
    return procs


def cpu_by_thread(pid: int) -> dict[str, float]:
    """CPU seconds used so far by each thread of process ``pid`` and of its descendants (a lanes' front's lanes and
    their cluster workers too), by ``process/thread`` name (the daemon names its threads and child processes at the
    OS level, `name_os_thread`; its own main thread, the event loop, is ``loop``); threads of one name summed."""
    hz = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for p in process_tree(pid):
        try:
            pname = "daemon" if p == pid else (Path(f"/proc/{p}/comm").read_text().strip())
            for t in Path(f"/proc/{p}/task").iterdir():
                tname = "loop" if (p == pid and t.name == str(pid)) else (t / "comm").read_text().strip()
                key = f"{pname}/{tname}"
                out[key] = out.get(key, 0.0) + _ticks((t / "stat").read_text()) / hz
        except OSError:
            continue
    return out


class Served:
    """``with Served(index, results_dir, args, tmp) as s:`` — ``s.spectra``, ``s.results``, ``s.port``."""

    def __init__(self, index: Path, results_dir: Path, args: list[str], cwd: Path, *, code: Path = ROOT,
                 kind: str = "--index", env: dict[str, str] | None = None) -> None:  # fmt: skip
        """``index``: the target's folder, given as ``kind`` (``--index``, ``--library``, ``--proteoforms``); ``env``:
        variables set for the daemon beside this environment's (``CUDA_VISIBLE_DEVICES``, say)."""
        self.spectra, self.results = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rtsearch.cli", "serve", kind, str(index), "--spectra", self.spectra,
             "--spectra-mode", "pull", "--results", self.results, "--metrics-port", "0", "--results-dir",
             str(results_dir), *args],
            stderr=subprocess.PIPE, text=True, env={**code_env(code), **(env or {})},
            cwd=cwd,  # not a checkout: PYTHONPATH decides
        )  # fmt: skip
        self.port = 0
        self.log: collections.deque[str] = collections.deque(maxlen=400)  # its last lines of stderr

    def __enter__(self) -> Served:
        if self.port:  # entered already (a caller that checks the start on its own)
            return self
        try:
            self.port = wait_ready(self.proc, 600, self.log)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@contextlib.contextmanager
def echo_floor(tools: Path) -> Iterator[tuple[str, str]]:
    """``echo_floor.py`` of ``tools`` (a Python service answering each message at once) on free loopback ports for
    the block: its (spectra, results) endpoints."""
    sp, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    echo = subprocess.Popen([sys.executable, str(tools / "echo_floor.py"), "--spectra", sp, "--results", rp])
    try:
        time.sleep(1.0)
        yield sp, rp
    finally:
        echo.kill()
        echo.wait(10)


def rt_load(tools: Path, mgf: Path, spectra: str, results: str, *args: str) -> list[dict[str, Any]]:
    """``rt_load.py`` of ``tools`` sending ``mgf`` to ``spectra`` and collecting from ``results``; its JSON line a
    phase (offered and answered counts, lost, duplicates, shed, latency quantiles)."""
    out = subprocess.run([sys.executable, str(tools / "rt_load.py"), str(mgf), "--spectra", spectra, "--results",
                          results, *args], capture_output=True, text=True, check=False)  # fmt: skip
    if out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
    return [x for x in (json.loads(y) for y in out.stdout.splitlines() if y.startswith("{")) if "offered_hz" in x]
