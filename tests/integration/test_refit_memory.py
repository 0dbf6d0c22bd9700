"""The refit process gives a finished run's memory back (issue 16's memory soak: the daemon's refit processes grew
run after run while its lanes and engines stayed flat).

Finishing a long run builds its results with Arrow (whose own allocator keeps freed memory) and NumPy (glibc's
heap); kept, the refit process's heap climbed over the first runs to ~600 MB each on the GPU machine. The bundled
E. coli run, scored once here on NumPy and repeated to a long run's rows, is finished three times, as the daemon
does at each run's end; the refit process's heap (``Pss_Anon``) after each stays where the first left it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.matches import ScoredBatch, concat_batches
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import named
from rtsearch.serve.runs.refits import Refitter, RunToFinish

ROWS = 150_000


def long_run(target: DatabaseTarget, spectra: list[Any], rows: int) -> ScoredBatch:
    """``spectra`` scored once on ``target`` and named, repeated to ``rows`` PSMs of distinct scans: a long run's
    PSMs, as a lane hands them to its refit process at the run's end."""
    one = named(target, target.score(SpectraBatch.of(spectra)))
    batch = concat_batches([one] * -(-rows // len(one))).take(np.arange(rows))
    batch.scan = np.arange(rows, dtype=batch.scan.dtype)
    return batch


def children(pid: int) -> list[int]:
    """Every process under ``pid`` (from ``/proc``)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        parents[int(stat.parent.name)] = int(text[text.rindex(")") + 2 :].split()[1])
    found, k = [pid], 0
    while k < len(found):
        found += [c for c, parent in parents.items() if parent == found[k]]
        k += 1
    return found[1:]


def refit_pid() -> int:
    """This process's refit process (it names its main thread ``refit``; forked by this process's fork server: a
    grandchild)."""
    return next(c for c in children(os.getpid()) if Path(f"/proc/{c}/comm").read_text().strip() == "refit")


def heap_mb(pid: int) -> float:
    """``Pss_Anon`` of ``pid`` in MB: its heap's share, not the pages of an index it maps read-only."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss_Anon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no Pss_Anon for {pid}")


def finish_settled(refitter: Refitter, reopen: Any, batch: ScoredBatch, name: str, path: Path) -> Path:
    """``batch`` finished as run ``name`` into ``path``, and then a task after it: by its end the finish, the
    give-back queued behind it, and the pool's hold on the finished call's arguments are all over."""
    counts = {"identified": 0, "unidentified": len(batch), "shed": 0}
    (done,) = refitter.finish(reopen, [RunToFinish(name, path, batch=batch, by_status=counts)]).result()
    refitter.start().result()
    assert done.path is not None, done.error
    return done.path


def test_a_finished_runs_memory_goes_back(demo_index, tmp_path):
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    spectra = [s for s in read_spectra(bundled(RUN)) if s.ms_level == 2]
    batch = long_run(target, spectra, ROWS)
    reopen = target.reopen()
    refitter = Refitter()
    try:
        refitter.start().result()
        pid = refit_pid()
        after = []
        for k in range(3):
            path = finish_settled(refitter, reopen, batch, f"run{k}", tmp_path / f"run{k}.tsv")
            assert sum(1 for _ in path.open()) == ROWS + 1  # every PSM written (a header line beside)
            path.unlink()
            after.append(heap_mb(pid))
    finally:
        refitter.shutdown()
    assert max(after[1:]) <= after[0] * 1.1 + 5, after  # held what it had after the first, not climbing
