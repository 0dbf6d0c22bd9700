"""Command-line options derived from the configuration's keys (`rtsearch.cli.flags`): `rtsearch serve`'s options
are the [serve] keys made with a flag, with their type, choices and the key's own words; given, they override the
file, and only they do."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from rtsearch.cli.flags import add_flags, overridden
from rtsearch.config import ServeConfig, parse_config


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="serve", exit_on_error=False)
    add_flags(p, ServeConfig)
    return p


def test_every_flagged_key_is_an_option_with_its_words_and_default() -> None:
    options = {a.dest: a for a in _parser()._actions if a.dest != "help"}
    flagged = [f for f in dataclasses.fields(ServeConfig) if f.metadata.get("flag")]
    assert len(flagged) == 21 and set(options) == {f.name for f in flagged}
    assert options["cluster_placement"].option_strings == ["--placement"]  # a name of its own
    assert options["budget_ms"].option_strings == ["--budget-ms"] and options["budget_ms"].type is float
    assert options["cluster_mode"].choices == ("auto", "replicate", "partition")
    assert options["metrics_port"].help.startswith("Prometheus /metrics") and options["metrics_port"].help.endswith(
        "(default 9108)")
    assert options["mqtt"].help.endswith("(default none)") and options["elution"].help.endswith("(default false)")


def test_given_options_override_the_file_and_only_they() -> None:
    cfg = parse_config({"serve": {"budget_ms": 250.0, "workers": 3, "lanes": 2}})
    args = _parser().parse_args(["--budget-ms", "50", "--placement", "ray", "--elution", "--lanes", "1"])
    got = overridden(args, cfg.serve)
    assert (got.budget_ms, got.cluster_placement, got.elution, got.lanes) == (50.0, "ray", True, 1)
    assert got.workers == 3 and got.metrics_port == 9108  # the file's, and the default
    assert overridden(_parser().parse_args([]), cfg.serve) == cfg.serve


@pytest.mark.parametrize("argv", [["--cluster-mode", "sharded"], ["--workers", "two"], ["--budget-ms"]])
def test_a_bad_value_is_refused_by_the_parser(argv: list[str]) -> None:
    with pytest.raises(argparse.ArgumentError):
        _parser().parse_args(argv)
