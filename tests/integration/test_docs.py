"""README.md as a new user reads it: short, the two commands first, an Install section, links that lead somewhere,
and every fenced block marked ``runnable`` runs as written; the configuration reference is what the code says
(issue 68).

A runnable block is one whose info string is ``bash runnable``: each of its lines is run in a fresh folder in which
``rtsearch/`` is the checkout's package (so the README's paths to the bundled data hold) and ``rtsearch`` is this
environment's command, as after ``. .venv/bin/activate``. (`tests/integration/test_demo.py` runs the first
command.)
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
MAX_BYTES = 12 * 1024
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    return [(info.strip(), body) for info, body in _FENCE.findall(README.read_text())]


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.encode()) <= MAX_BYTES, len(text.encode())
    info, first = _blocks()[0]
    commands = [line.split("#")[0].strip() for line in first.splitlines()]
    assert commands == ["./scripts/demo", "./scripts/test"]
    assert "\n## Install\n" in text
    assert not re.search(r"RTSEARCH_(WARM_UP|EXPIRY)", text)  # no internal test knob


def test_every_link_of_the_readme_and_docs_leads_to_a_file() -> None:
    for page in (README, *sorted((ROOT / "docs").glob("*.md"))):
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            path = target.split("#")[0]
            assert (page.parent / path).exists(), f"{page.name} links to {target}, which is not there"


@pytest.mark.slow
def test_the_runnable_commands_run_as_written(tmp_path: Path) -> None:
    runnable = [body for info, body in _blocks() if info.split()[1:2] == ["runnable"]]
    assert runnable, "no block of README.md is marked runnable"
    (tmp_path / "rtsearch").symlink_to(ROOT / "rtsearch")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for body in runnable:
        for line in body.splitlines():
            command = line.split(" #")[0].strip()
            if not command:
                continue
            argv = shlex.split(command)
            proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
            assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert (tmp_path / "results.tsv").stat().st_size > 0


def test_the_configuration_reference_is_what_the_code_says() -> None:
    """docs/configuration.md is written from rtsearch/config/ (`docs/make_configuration.py`): every key of every
    section, its default and its choices, as the code has them."""
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "make_configuration.py"), "--check"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert "| `budget_ms` | number | `100.0` |" in text and "`trypsin`, `trypsin/p`" in text
