"""Shared fixtures: where the real data lives, and indexes built once per session (once for all of its pytest-xdist
workers)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# each NumPy daemon the tests start (in process or as `rtsearch serve`) warms up without its 512-spectrum batch,
# ~0.9 s of its start on the 2-core CI machine; the engine-time model extrapolates, then learns from real batches
os.environ.setdefault("RTSEARCH_WARM_UP_BATCH_S", "0.25")


def data_dir() -> Path:
    """The shared real-data folder: $RTSEARCH_DATA, else ../shared/data beside the checkout."""
    for cand in (os.environ.get("RTSEARCH_DATA"), ROOT / "shared" / "data", ROOT.parent / "shared" / "data"):
        if cand and (Path(cand) / "ecoli-small").is_dir():
            return Path(cand)
    raise RuntimeError("real data not found: set RTSEARCH_DATA to the shared/data folder")


@pytest.fixture(autouse=True)
def _leaves_nothing_running():
    """No test leaves a thread or process of its own running into the next (`tests.leaks`)."""
    from tests import leaks

    before = leaks.running()
    yield
    if left := leaks.left_behind(before):
        pytest.fail(f"the test left {len(left)} thread(s) or process(es) running: {'; '.join(left[:10])}")


@pytest.fixture(scope="session")
def data() -> Path:
    return data_dir()


@pytest.fixture(scope="session")
def shared_tools() -> Path:
    """The shared tools (`rt_load.py`, the independent protocol client): $RTSEARCH_TOOLS, else ../shared/tools."""
    for cand in (os.environ.get("RTSEARCH_TOOLS"), ROOT / "shared" / "tools", ROOT.parent / "shared" / "tools"):
        if cand and (Path(cand) / "rt_load.py").is_file():
            return Path(cand)
    raise RuntimeError("the shared tools were not found: set RTSEARCH_TOOLS to the shared/tools folder")


@contextlib.contextmanager
def built_once(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A folder ``name`` that this session's xdist workers share (each worker's temporary root sits in one folder),
    and an exclusive lock on it for the block: the first worker builds there, the others wait, then find it built."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield root / name


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory):
    """The bundled E. coli index (what `rtsearch demo` searches), built once per session."""
    from rtsearch.cli.demo import cached_index

    with built_once(tmp_path_factory, "demo-cache") as folder:
        index, _ = cached_index(folder)
    return index


@pytest.fixture(scope="session")
def dev_indexes(tmp_path_factory, data):
    """One index per distinct dev-run database, built through the CLI once per session, two at a time (processes:
    the builds are NumPy and mostly one core each)."""
    import concurrent.futures
    import multiprocessing

    from rtsearch.cli import main
    from tests.devruns import DEV_RUNS

    out: dict[tuple[str, ...], Path] = {}
    with built_once(tmp_path_factory, "dev-indexes") as root:
        todo = []
        for k, dev in enumerate(DEV_RUNS):
            if dev.fastas not in out:
                out[dev.fastas] = root / f"idx{k}"
                if not (out[dev.fastas] / "manifest.json").is_file():
                    todo.append((dev, out[dev.fastas]))
        if todo:
            with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
                builds = [pool.submit(main, ["index", "build", "--fasta", *map(str, dev.paths(data)[0]), "--out",
                                             str(folder)]) for dev, folder in todo]  # fmt: skip
                assert [f.result() for f in builds] == [0] * len(builds)
    return out
