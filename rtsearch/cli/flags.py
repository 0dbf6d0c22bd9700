"""Command-line options derived from a configuration section's keys (`rtsearch.config.file.setting`): each key made
with a ``flag`` is an option of the same meaning, type and choices, whose ``--help`` is the key's own words and its
default; given, it overrides the file's value (`overridden`). One place says what a knob is, not two."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any

_METAVARS = {int: "N", float: "X", str: "TEXT"}


def add_flags(parser: argparse.ArgumentParser, section: type) -> None:
    """An option on ``parser`` for every key of ``section`` (a configuration dataclass) made with a ``flag``."""
    hints = typing.get_type_hints(section)
    for f in dataclasses.fields(section):
        flag = f.metadata.get("flag")
        if not flag:
            continue
        name = flag if isinstance(flag, str) else "--" + f.name.replace("_", "-")
        hint = hints[f.name]
        shown = "none" if f.default == "" else str(f.default).lower() if isinstance(f.default, bool) else f.default
        text = f"{f.metadata['doc']} (default {shown})".replace("%", "%%")
        if hint is bool:
            parser.add_argument(name, dest=f.name, action="store_true", default=None, help=text)
        elif typing.get_origin(hint) is typing.Literal:
            parser.add_argument(name, dest=f.name, choices=typing.get_args(hint), help=text)
        else:
            parser.add_argument(name, dest=f.name, type=hint, metavar=f.metadata["metavar"] or _METAVARS[hint],
                                help=text)  # fmt: skip


def overridden(args: argparse.Namespace, settings: Any) -> Any:
    """``settings`` (a configuration section) with the options ``add_flags`` made that the command line gave."""
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(settings)
             if f.metadata.get("flag") and getattr(args, f.name, None) is not None}  # fmt: skip
    return dataclasses.replace(settings, **given)
