"""The refit process gives a finished run's memory back (issue 16's memory soak: the daemon's refit processes grew
run after run while its lanes and engines stayed flat).

Finishing a long run builds its results with Arrow (whose own allocator keeps freed memory) and NumPy (glibc's
heap); kept, the refit process's heap climbed over the first runs to ~600 MB each on the GPU machine. The bundled
E. coli run, scored once here on NumPy and repeated to a long run's rows, is finished three times, as the daemon
does at each run's end; the refit process's heap (``Pss_Anon``) after each stays where the first left it.
"""

from __future__ import annotations

from bench.refit_memory import finish_settled, long_run, refit_pid
from bench.serving import memory_kb
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.serve.refits import Refitter

ROWS = 150_000


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
            after.append(memory_kb(pid)["pss_anon"] / 1024)  # its heap (MB), not the index's mapped pages
    finally:
        refitter.shutdown()
    assert max(after[1:]) <= after[0] * 1.1 + 5, after  # held what it had after the first, not climbing
