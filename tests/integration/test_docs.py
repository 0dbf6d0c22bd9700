"""README.md as a new user reads it: short, the two commands first, an Install section, links that lead somewhere,
and every fenced block marked ``runnable`` runs as written; the configuration reference is what the code says
(issue 68); every command, option and file format the README names is one ``--help`` lists (issue 73).

A runnable block is one whose info string is ``bash runnable``: each of its lines is run in a fresh folder in which
``rtsearch/`` is the checkout's package (so the README's paths to the bundled data hold) and ``rtsearch`` is this
environment's command, as after ``. .venv/bin/activate``. (`tests/integration/test_demo.py` runs the first
command.)
"""

from __future__ import annotations

import argparse
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


def _commands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every command and action of ``p``, by its words (``"index build"``), with its parser ("" is ``p``)."""
    out = {"": p}
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.update({f"{name} {k}".strip(): v for k, v in _commands(sub).items()})
    return out


def _options(p: argparse.ArgumentParser) -> set[str]:
    return {s for a in p._actions for s in a.option_strings}


def _readme_commands(program: str) -> list[list[str]]:
    """Each ``program ...`` of README.md: the lines of its code blocks and its inline code, as words."""
    text = README.read_text()
    lines = [ln for _, body in _blocks() for ln in body.splitlines()]
    lines += re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
    return [shlex.split(ln.split(" #")[0].replace("[", "").replace("]", "").rstrip(" &"))
            for ln in lines if ln.strip().startswith(program + " ")]  # fmt: skip


@pytest.mark.parametrize("program", ["rtsearch", "rtsearch-sim"])
def test_every_command_and_option_the_readme_names_is_in_the_help(program: str) -> None:
    from rtsearch.cli import parser
    from rtsearch_sim.cli import _parser as build_parser

    commands = _commands(parser() if program == "rtsearch" else build_parser())
    named = _readme_commands(program)
    assert len(named) >= (8 if program == "rtsearch" else 1)
    for words in named:
        args = words[1:]
        if args and args[0].isupper():  # a placeholder: rtsearch COMMAND --help
            continue
        path = next(p for p in sorted(commands, key=len, reverse=True)
                    if args[: len(p.split())] == p.split())  # fmt: skip
        assert path, f"README: {' '.join(words)} names no command of {program} --help"
        known = _options(commands[path]) | _options(commands[""])
        for arg in args:
            if arg.startswith("--"):
                assert arg.split("=")[0] in known, f"README: {' '.join(words)}: {arg} is not an option of {path}"
    # and every command the help lists is in the README
    tops = {p.split()[0] for p in commands if p}
    assert not {t for t in tops if f"{program} {t}" not in README.read_text()}


def test_the_formats_the_readme_lists_are_those_read_and_written() -> None:
    from rtsearch.cli import parser
    from rtsearch.io.spectra import _SUFFIXES
    from rtsearch_sim.cli import _parser as build_parser

    text = " ".join(README.read_text().split())
    formats = {s.removesuffix(".gz").lstrip(".") for s in _SUFFIXES}
    assert formats == {"mzml", "mzxml", "mgf", "ms2", "msalign"}
    commands, sim = _commands(parser()), _commands(build_parser())
    sentences = ((r"`search` reads (.+?) and writes", commands["search"].format_help()),
                 (r"`rtsearch-sim replay` replays (.+?) files", sim["replay"].format_help()))  # fmt: skip
    for sentence, helptext in sentences:
        m = re.search(sentence, text)
        assert m, sentence
        listed = {f for f in formats if re.search(rf"\b{f}\b", m.group(1), re.I)}
        assert listed == formats, (sentence, formats - listed)
        helped = {f for f in formats if re.search(rf"\b{f}\b", " ".join(helptext.split()), re.I)}
        assert helped == formats, (sentence, formats - helped)
    to = next(a for a in commands["export"]._actions if "--to" in a.option_strings)
    assert re.search(r"--to ([\w|]+)", text).group(1).split("|") == list(to.choices)
    from rtsearch.library.formats import SQLITE

    library = re.search(r"rtsearch library import \S+ --out \S+ # ([^\n]+?) rtsearch", text).group(1)
    assert all(s in library for s in SQLITE) and "MSP" in library and "sptxt" in library
