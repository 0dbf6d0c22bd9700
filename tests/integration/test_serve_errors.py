"""`rtsearch serve` with an endpoint it cannot use: one line, exit 2, no hang."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import zmq

from rtsearch.cli.demo import cached_index


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    cached_index(cache)
    (folder,) = cache.glob("demo-ecoli-*")
    return folder


def _serve(index_dir, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rtsearch.cli", "serve", "--index", str(index_dir), "--backend", "numpy", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_metrics_port_in_use(index_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = _serve(index_dir, "--metrics-port", str(port), "--results", "tcp://127.0.0.1:*")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"rtsearch: error: metrics port 127.0.0.1:{port}:")


@pytest.mark.parametrize("lanes", ["1", "2"])
@pytest.mark.parametrize("which", ["--results", "--spectra"])
def test_zeromq_endpoint_in_use(index_dir, which, lanes):
    """Also behind the lanes' front, which binds both before it starts any lane (said at once, no lane's work lost)."""
    ctx = zmq.Context()
    holder = ctx.socket(zmq.PUB)
    port = holder.bind_to_random_port("tcp://127.0.0.1")
    try:
        other = "--spectra" if which == "--results" else "--results"
        proc = _serve(index_dir, "--metrics-port", "0", "--spectra-mode", "pull", which, f"tcp://127.0.0.1:{port}",
                      other, "tcp://127.0.0.1:*", "--lanes", lanes)  # fmt: skip
    finally:
        holder.close(0)
        ctx.term()
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("rtsearch: error: ") and "Address already in use" in last
    assert "Traceback" not in proc.stderr and " up: spectra " not in proc.stderr  # no lane was started


def _plain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rtsearch.cli", "serve", "--backend", "numpy", *args],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_library_target_errors(index_dir, tmp_path):
    """--open without --library, --index with --library, a folder that is no library: one line, no traceback."""
    proc = _plain("--index", str(index_dir), "--open")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "rtsearch: error: --open applies to library search (--library)"
    proc = _plain("--index", str(index_dir), "--library", str(index_dir))
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
    proc = _plain("--library", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"rtsearch: error: {tmp_path}: not a spectral library")
