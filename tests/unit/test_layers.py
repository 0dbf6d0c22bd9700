"""The layer rule of ARCHITECTURE.md, and no import circles.

The core (everything but ``serve/``, ``cluster/``, ``cli/`` and ``__main__``) never imports asyncio,
ZeroMQ, MQTT, Prometheus or Ray, nor a shell package; no two rtsearch modules import
each other in a circle, counting every import statement: at the top, inside functions
(lazy) and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHELL_PACKAGES = ("rtsearch.serve", "rtsearch.cluster", "rtsearch.cli", "rtsearch.__main__")
SHELL_ONLY = ("asyncio", "zmq", "aiomqtt", "paho", "prometheus_client", "ray")


def modules(package_dir: Path) -> dict[str, Path]:
    """Every module of the package in ``package_dir`` by dotted name (a package by its ``__init__``)."""
    base = package_dir.parent
    out = {}
    for f in sorted(package_dir.rglob("*.py")):
        parts = f.relative_to(base).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` imports anywhere in its source."""
    out: set[str] = set()
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative: from the package this module is in
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                mod = ".".join([*anchor, mod] if mod else anchor)
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # ``import a.b.c`` of a package's module, or an outside library
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    known = modules(package_dir)
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def is_core(module: str) -> bool:
    return not any(module == p or module.startswith(p + ".") for p in SHELL_PACKAGES)


def test_no_two_modules_import_each_other_in_a_circle() -> None:
    graph = import_graph(ROOT / "rtsearch")
    assert len(graph) > 50 and "rtsearch.serve.daemon" in graph["rtsearch.serve.service"]  # a lazy import seen
    assert cycles(graph) == []


@pytest.mark.parametrize("how", ["lazy", "type_checking"])
def test_a_planted_circle_is_found(tmp_path, how) -> None:
    """A copy of the package with one more import in `rtsearch.types`, back from a module that imports it."""
    copy = tmp_path / "rtsearch"
    shutil.copytree(ROOT / "rtsearch", copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    types = copy / "types.py"
    if how == "lazy":
        types.write_text(types.read_text() + "\n\ndef _planted():\n    from rtsearch.search.live import LiveRun\n")
    else:
        types.write_text(types.read_text() + "\nif TYPE_CHECKING:\n    from rtsearch.search import live\n")
    found = cycles(import_graph(copy))
    assert len(found) == 1 and {"rtsearch.types", "rtsearch.search.live"} <= set(found[0])


def test_the_core_imports_no_shell_package_or_library_in_any_statement() -> None:
    graph = import_graph(ROOT / "rtsearch")
    core = sorted(m for m in graph if is_core(m))
    assert {"rtsearch.search.live", "rtsearch.scoring.database.engine", "rtsearch.io.spectra"} <= set(core)
    offenders = {m: sorted(t for t in graph[m] if not is_core(t)) for m in core}
    assert {m: t for m, t in offenders.items() if t} == {}
    for m in core:  # outside libraries, by the first part of each imported name
        tree = ast.parse(modules(ROOT / "rtsearch")[m].read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}
        assert not {x.split(".")[0] for x in names} & set(SHELL_ONLY), m


def test_importing_the_whole_core_loads_no_shell_library() -> None:
    core = [m for m in import_graph(ROOT / "rtsearch") if is_core(m)]
    code = (
        f"import sys\nfor m in {core!r}: __import__(m)\n"
        f"print(','.join(m for m in {SHELL_ONLY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the core pulled in: {out.stdout.strip()}"


def test_only_the_configuration_reads_an_rtsearch_environment_variable() -> None:
    """Every ``RTSEARCH_*`` knob is declared in `rtsearch.config.environment` (ARCHITECTURE.md: one configuration):
    no other module names one in a string its code could look up (docstrings and comments may mention them)."""
    found = {}
    for name, path in modules(ROOT / "rtsearch").items():
        if name.startswith("rtsearch.config"):
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}  # fmt: skip
        hits = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and id(n) not in docs and "RTSEARCH_" in n.value]  # fmt: skip
        if hits:
            found[name] = hits
    assert found == {}
