"""Write ``docs/configuration.md``, the configuration's reference, from ``rtsearch/config/`` itself.

    python docs/make_configuration.py          # rewrite docs/configuration.md
    python docs/make_configuration.py --check  # exit 1 if it differs from what this writes

Each section's table lists every key of its dataclass in order: its type, its default, the values a choice allows
(the `Literal` the command line's choices come from too) and what the key's `setting` says (the words its option's
``--help`` gives too), else the comment beside the field. What the file
says is what the code does: a key added without a word beside it shows up here without one.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtsearch import config  # noqa: E402
from rtsearch.config import environment  # noqa: E402
from rtsearch.config import file as config_file  # noqa: E402

OUT = ROOT / "docs" / "configuration.md"
CLASSES = {"database": config.DatabaseConfig, "search": config.SearchConfig, "library": config.LibraryConfig,
           "proteoforms": config.ProteoformConfig, "topdown": config.TopDownConfig,
           "serve": config.ServeConfig}  # fmt: skip
HEAD = """# Configuration reference

One TOML file (`--config FILE`), one table a section; every key is optional and takes the default below. Unknown
keys, wrong types and values out of range are refused with the key named; a key that moved says where it went.
Command-line flags override the file (`rtsearch COMMAND --help`). Tolerances are strings with their unit
(`"20 ppm"`, `"0.5 Da"`); modifications are `Name@Residues` (any Unimod name or accession, or a mass: `+15.9949@M`;
`@Protein N-term`, `@N-term`).

Generated from `rtsearch/config/` by `python docs/make_configuration.py`; do not edit by hand.
"""
TABLE = "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n"
KNOBS = """
## Tuning knobs (environment)

Measured defaults that benchmarks turn, not settings a deployment needs (`rtsearch/config/environment.py`). Each is an
environment variable of the daemon's process and the processes it starts; unset, the default written beside the code
that uses it applies (named below with its value). A value that is not a number in range is ignored with a warning.

| variable | type | range | what it sets (default) |
|---|---|---|---|
"""


def _comments() -> dict[tuple[str, str], str]:
    """``(class, field) -> the comment beside the field`` in rtsearch/config/file.py."""
    source = Path(config_file.__file__).read_text()
    lines = source.splitlines()
    out = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                line = lines[item.end_lineno - 1] if item.end_lineno else ""
                _, hash_, comment = line.partition("  # ")
                above = []  # or the comment lines right above it
                k = item.lineno - 2
                while k >= 0 and lines[k].strip().startswith("# "):
                    above.insert(0, lines[k].strip()[2:])
                    k -= 1
                out[(node.name, item.target.id)] = comment.strip() if hash_ else " ".join(above)
    return out


def _type(hint: Any) -> tuple[str, str]:
    """A field's type as the file writes it, and the values it allows (a choice's)."""
    if typing.get_origin(hint) is typing.Literal:
        return "string", ", ".join(f"`{v}`" for v in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        (item, *_) = typing.get_args(hint)
        return f"list of {_type(item)[0]}", ""
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if hint in names:
        return names[hint], ""
    if getattr(hint, "__name__", "") == "Tolerance":
        return "tolerance", "`\"N ppm\"`, `\"N Da\"`"
    return getattr(hint, "__name__", str(hint)), ""


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, float) and v.is_integer() and abs(v) >= 1e4:
        return f"{v:,.1f}"
    if type(v).__name__ == "Tolerance":
        return f'"{v}"'
    return str(v)


def render() -> str:
    comments = _comments()
    parts = [HEAD]
    for section, cls in CLASSES.items():
        hints = typing.get_type_hints(cls)
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        parts.append(f"\n## [{section}]\n\n{doc}\n\n{TABLE}")
        for f in dataclasses.fields(cls):
            kind, allowed = _type(hints[f.name])
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            note = (f.metadata.get("doc") or comments.get((cls.__name__, f.name), "")).replace("|", "\\|")
            parts.append(f"| `{f.name}` | {kind} | `{_value(default)}` | {allowed} | {note} |\n")
    parts.append(KNOBS)
    for f, name in zip(environment.KNOBS, environment.NAMES, strict=True):
        kind = {"bool": "boolean", "int": "integer"}.get(str(f.type).split(" ")[0], "number")
        bound = "> 0" if f.metadata["positive"] else "≥ 0"
        parts.append(f"| `{name}` | {kind} | {bound if kind != 'boolean' else '0 or 1'} | {f.metadata['doc']} |\n")
    return "".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is not what {Path(__file__).name} writes: run python docs/make_configuration.py",
                  file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
