"""rtsearch as a service: the systemd unit verifies; ``rtsearch serve`` says when it is ready (``/readyz``, and
``READY=1`` to systemd's notify socket) and when it stops; another user serves an index root built.

Before issue 22: ``Type=simple`` with no readiness; every path of the metrics port answered with the metrics; index
folders were 0700 and results files 0600 whatever the umask, so the service user could not read an index root
built ("internal error: PermissionError").
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from rtsearch.cli.demo import FASTA, TOML, bundled
from tests.streaming import ServeProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy/systemd/rtsearch.service"


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""  # not listening yet


def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze (Debian package systemd) is needed"
    # the unit as installed: its ExecStart is this environment's rtsearch (verify checks the program exists)
    unit = tmp_path / "rtsearch.service"
    unit.write_text(UNIT.read_text().replace("/opt/rtsearch/bin/rtsearch", str(Path(sys.executable).with_name(
        "rtsearch"))))  # fmt: skip
    res = subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr
    assert "Type=notify" in UNIT.read_text()


def test_not_ready_until_the_index_is_loaded_then_ready_and_systemd_told(demo_index, tmp_path: Path) -> None:
    notify = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify))
    sock.settimeout(0.05)
    port = free_port()
    daemon = ServeProcess(["--index", str(demo_index.folder), "--config", str(bundled(TOML)), "--backend", "numpy",
                           "--spectra", f"tcp://127.0.0.1:{free_port()}", "--results", f"tcp://127.0.0.1:{free_port()}",
                           "--metrics-port", str(port), "--results-dir", str(tmp_path / "res")],
                          env={"NOTIFY_SOCKET": str(notify)})  # fmt: skip
    said: list[str] = []
    seen: list[tuple[int, str]] = []  # /readyz answers, in order, while it starts
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not seen or seen[-1][0] != 200):
            code, body = _get(port, "/readyz")
            if code:
                seen.append((code, body.strip()))
            with contextlib.suppress(TimeoutError):
                said.append(sock.recv(4096).decode())
        assert seen and seen[-1] == (200, "ready"), (seen[-5:], daemon.log)
        assert seen[0][0] == 503 and seen[0][1] in ("loading the target", "starting"), seen[:3]
        assert {body for code, body in seen if code == 503} <= {"loading the target", "starting"}
        assert " ready: " in daemon.log
        deadline = time.monotonic() + 10
        while not any("READY=1" in m for m in said) and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                said.append(sock.recv(4096).decode())
        assert any(m.startswith("READY=1") and "STATUS=serving" in m for m in said), said
        assert _get(port, "/healthz") == (200, "ok\n")
        code, text = _get(port, "/metrics")
        assert code == 200 and "rtsearch_ready 1.0" in text and "process_resident_memory_bytes" in text
        assert _get(port, "/nothing")[0] == 404
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(60) == 0
        while True:  # what it said while stopping
            try:
                said.append(sock.recv(4096).decode())
            except (TimeoutError, OSError):
                break
        assert any(m.startswith("STOPPING=1") for m in said), said
    finally:
        daemon.kill()
        sock.close()


def _as_another_user(home: Path) -> dict[str, Any]:
    """How another user runs this environment's rtsearch: its interpreter may live in root's home (pyenv, 0700
    /root), so the system's Python of the same version with this environment's packages on its path."""
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    python = str(system) if system.exists() and str(Path(sys.executable).resolve()).startswith("/root") else \
        sys.executable  # fmt: skip
    path = os.pathsep.join([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], str(ROOT),
                            str(ROOT / "simulators")])  # fmt: skip
    return {"python": python, "env": {"HOME": str(home), "PYTHONPATH": path}}


def _build_as_root_would(base: Path) -> Path:
    """The bundled index built into ``base`` (a system folder, as /var/lib/rtsearch: 0755) with umask 022."""
    base.chmod(0o755)
    index = base / "index"
    old = os.umask(0o022)
    try:
        from rtsearch.cli import main

        assert main(["index", "build", "--fasta", str(bundled(FASTA)), "--config", str(bundled(TOML)), "--out",
                     str(index)]) == 0  # fmt: skip
    finally:
        os.umask(old)
    return index


def test_an_index_and_results_files_follow_the_umask(tmp_path: Path) -> None:
    index = _build_as_root_would(tmp_path)
    assert stat.S_IMODE(index.stat().st_mode) == 0o755
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in index.iterdir() if p.is_file())
    from rtsearch.io.results import write_columns

    old = os.umask(0o027)
    try:
        write_columns({"scan": [1, 2]}, ("scan",), tmp_path / "out.tsv")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out.tsv").stat().st_mode) == 0o640


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root (CI runs as root)")
def test_another_user_serves_an_index_built_by_root() -> None:
    base = Path(tempfile.mkdtemp(prefix="rtsearch-perms-"))  # not under pytest's 0700 folder: nobody must reach it
    try:
        index, results = _build_as_root_would(base), base / "results"
        results.mkdir()
        os.chown(results, 65534, 65534)  # nobody's
        port = free_port()
        daemon = ServeProcess(["--index", str(index), "--config", str(bundled(TOML)), "--backend", "numpy",
                               "--spectra", f"tcp://127.0.0.1:{free_port()}", "--results",
                               f"tcp://127.0.0.1:{free_port()}", "--metrics-port", str(port), "--results-dir",
                               str(results)],
                              prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"),
                              **_as_another_user(results))  # fmt: skip
        try:
            assert daemon.wait_for(" ready: ", 120), daemon.log
            assert _get(port, "/readyz") == (200, "ready\n")
        finally:
            daemon.proc.send_signal(signal.SIGTERM)
            daemon.proc.wait(60)
            daemon.kill()
    finally:
        shutil.rmtree(base, ignore_errors=True)
