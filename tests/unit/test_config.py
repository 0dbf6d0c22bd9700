"""Tests for `rtsearch.types.Tolerance` and the TOML configuration in `rtsearch.config`.

Covers tolerance parsing and windows, the defaults, the example TOML of the
issue (every key as written), and the errors: unknown keys and tables, wrong
types, bad enum values, out-of-range values and invalid TOML, each a
`ConfigError` naming the key (and the file, through `load_config`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rtsearch.config import (
    Config,
    DatabaseConfig,
    LibraryConfig,
    SearchConfig,
    load_config,
    parse_config,
    resolved_dict,
)
from rtsearch.errors import ConfigError
from rtsearch.types import Tolerance

ISSUE_TOML = """\
[database]
decoys = "reverse"
enzyme = "trypsin"
missed_cleavages = 2
min_length = 7
max_length = 50
fixed_mods = ["Carbamidomethyl@C"]
variable_mods = ["Oxidation@M"]
max_variable_mods = 2
[search]
precursor_tolerance = "20 ppm"
fragment_tolerance = "0.5 Da"
isotope_errors = [0, 1]
charges = [2, 3, 4]
"""


# --------------------------------------------------------------------------- Tolerance


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("20 ppm", 20.0, "ppm"),
        ("20ppm", 20.0, "ppm"),
        ("  10 PPM ", 10.0, "ppm"),
        ("0.5 Da", 0.5, "Da"),
        ("0.02 da", 0.02, "Da"),
        (".5 Da", 0.5, "Da"),
        ("1e-2 Da", 0.01, "Da"),
        ("0.5 Th", 0.5, "Da"),  # Th taken as Da
        ("5 mmu", 0.005, "Da"),  # 5 milli-mass-units = 0.005 Da
    ],
)
def test_tolerance_parse(text: str, value: float, unit: str) -> None:
    tol = Tolerance.parse(text)
    assert tol.unit == unit
    assert tol.value == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    "text", ["", "20", "ppm", "20 ppb", "-5 ppm", "0 ppm", "0 Da", "twenty ppm", "20 ppm 3", "nan Da", "inf ppm"]
)
def test_tolerance_parse_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        Tolerance.parse(text)


def test_tolerance_constructor_rejects() -> None:
    with pytest.raises(ConfigError):
        Tolerance(-1.0, "Da")
    with pytest.raises(ConfigError):
        Tolerance(float("nan"), "ppm")
    with pytest.raises(ConfigError):
        Tolerance(1.0, "mDa")  # type: ignore[arg-type]


def test_tolerance_bounds_golden() -> None:
    # 20 ppm of 1000 Da = 1000 * 20e-6 = 0.02 Da
    lo, hi = Tolerance.parse("20 ppm").bounds(1000.0)
    assert lo == pytest.approx(999.98, abs=1e-9)
    assert hi == pytest.approx(1000.02, abs=1e-9)
    # 10 ppm of 2500 Da = 0.025 Da
    lo, hi = Tolerance.parse("10 ppm").bounds(2500.0)
    assert (lo, hi) == (pytest.approx(2499.975, abs=1e-9), pytest.approx(2500.025, abs=1e-9))
    # Da windows do not depend on the mass
    assert Tolerance.parse("0.5 Da").bounds(500.0) == (499.5, 500.5)
    assert Tolerance.parse("0.5 Da").bounds(1500.0) == (1499.5, 1500.5)
    # 5 mmu = 0.005 Da
    lo, hi = Tolerance.parse("5 mmu").bounds(100.0)
    assert (lo, hi) == (pytest.approx(99.995, abs=1e-12), pytest.approx(100.005, abs=1e-12))


def test_tolerance_str_round_trip() -> None:
    for text in ("20 ppm", "0.5 Da", "5 mmu"):
        tol = Tolerance.parse(text)
        assert Tolerance.parse(str(tol)) == tol
    assert str(Tolerance.parse("20 ppm")) == "20 ppm"
    assert str(Tolerance.parse("0.5 Da")) == "0.5 Da"


# --------------------------------------------------------------------------- defaults


def test_defaults() -> None:
    cfg = parse_config({})
    assert cfg == Config()
    assert cfg.database_given is False
    db, se = cfg.database, cfg.search
    assert db.enzyme == "trypsin"
    assert db.specificity == "full"
    assert db.missed_cleavages == 2
    assert (db.min_length, db.max_length) == (7, 50)
    assert db.fixed_mods == ("Carbamidomethyl@C",)
    assert db.variable_mods == ("Oxidation@M",)
    assert db.max_variable_mods == 2
    assert db.decoys == "reverse"
    assert db.decoy_prefix == "rev_"
    assert se.precursor_tolerance == Tolerance(20.0, "ppm")
    assert se.fragment_tolerance == Tolerance(0.5, "Da")
    assert se.isotope_errors == (0, 1)
    assert se.charges == (2, 3, 4)
    assert se.score == "hyperscore"
    assert load_config(None) == Config()


def test_empty_tables_give_defaults_and_mark_database_given() -> None:
    cfg = parse_config({"database": {}, "search": {}})
    assert cfg.database == DatabaseConfig()
    assert cfg.search == SearchConfig()
    assert cfg.database_given is True
    assert parse_config({"search": {}}).database_given is False


# --------------------------------------------------------------------------- the issue's example


def test_issue_example_toml(tmp_path: Path) -> None:
    path = tmp_path / "rtsearch.toml"
    path.write_text(ISSUE_TOML, encoding="utf-8")
    cfg = load_config(path)
    db, se = cfg.database, cfg.search
    assert cfg.database_given is True
    assert db.decoys == "reverse"
    assert db.enzyme == "trypsin"
    assert db.missed_cleavages == 2
    assert db.min_length == 7
    assert db.max_length == 50
    assert db.fixed_mods == ("Carbamidomethyl@C",)
    assert db.variable_mods == ("Oxidation@M",)
    assert db.max_variable_mods == 2
    assert se.precursor_tolerance == Tolerance(20.0, "ppm")
    assert se.fragment_tolerance == Tolerance(0.5, "Da")
    assert se.isotope_errors == (0, 1)
    assert se.charges == (2, 3, 4)
    # frozen: the resolved config cannot be changed behind a running search
    with pytest.raises(dataclasses.FrozenInstanceError):
        db.enzyme = "lys-c"  # type: ignore[misc]


def test_non_default_values(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        "[database]\n"
        'enzyme = "Lys-C"\n'  # enum values are case-insensitive
        'specificity = "semi"\n'
        "missed_cleavages = 0\n"
        "min_mass = 400\n"  # an integer is accepted for a float
        'decoys = "none"\n'
        "fixed_mods = []\n"
        'variable_mods = ["Oxidation@M", "Acetyl@Protein N-term"]\n'
        "isoleucine_equals_leucine = true\n"
        "[search]\n"
        'precursor_tolerance = "10 ppm"\n'
        'fragment_tolerance = "20 mmu"\n'
        "isotope_errors = [-1, 0, 1, 2]\n"
        "charges = [1, 5]\n"
        'score = "xcorr"\n'
        "top_peaks = 100\n",
        encoding="utf-8",
    )
    cfg = load_config(path)
    assert cfg.database.enzyme == "lys-c"
    assert cfg.database.specificity == "semi"
    assert cfg.database.missed_cleavages == 0
    assert cfg.database.min_mass == 400.0 and isinstance(cfg.database.min_mass, float)
    assert cfg.database.decoys == "none"
    assert cfg.database.fixed_mods == ()
    assert cfg.database.variable_mods == ("Oxidation@M", "Acetyl@Protein N-term")
    assert cfg.database.isoleucine_equals_leucine is True
    assert cfg.search.precursor_tolerance == Tolerance(10.0, "ppm")
    assert cfg.search.fragment_tolerance.unit == "Da"
    assert cfg.search.fragment_tolerance.value == pytest.approx(0.02)
    assert cfg.search.isotope_errors == (-1, 0, 1, 2)
    assert cfg.search.charges == (1, 5)
    assert cfg.search.score == "xcorr"
    assert cfg.search.top_peaks == 100


def test_resolved_dict_round_trips() -> None:
    cfg = parse_config(
        {
            "database": {"enzyme": "asp-n", "variable_mods": ["Phospho@STY"], "min_length": 6},
            "search": {"fragment_tolerance": "0.02 Da", "charges": [2, 3]},
        }
    )
    plain = resolved_dict(cfg)
    assert plain["search"]["fragment_tolerance"] == "0.02 Da"
    assert plain["search"]["precursor_tolerance"] == "20 ppm"
    assert plain["database"]["variable_mods"] == ["Phospho@STY"]
    again = parse_config({"database": plain["database"], "search": plain["search"]})
    assert again.database == cfg.database
    assert again.search == cfg.search


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({"database": {"enzymes": "trypsin"}}, "enzymes"),
        ({"search": {"precursor_tol": "20 ppm"}}, "precursor_tol"),
        ({"databse": {}}, "databse"),
        ({"output": {"dir": "x"}}, "output"),
    ],
)
def test_unknown_keys_and_tables(raw: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_config(raw)


def test_unknown_key_lists_known_keys() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({"database": {"missed_cleavage": 1}})
    msg = str(e.value)
    assert "missed_cleavage" in msg and "missed_cleavages" in msg and "[database]" in msg


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("database", "missed_cleavages", "2"),
        ("database", "missed_cleavages", 2.0),
        ("database", "missed_cleavages", True),
        ("database", "min_length", [7]),
        ("database", "min_mass", "500"),
        ("database", "min_mass", True),
        ("database", "clip_n_term_met", 1),
        ("database", "clip_n_term_met", "yes"),
        ("database", "fixed_mods", "Carbamidomethyl@C"),
        ("database", "variable_mods", [1]),
        ("database", "decoy_prefix", 5),
        ("database", "enzyme", 5),
        ("search", "precursor_tolerance", 20),
        ("search", "precursor_tolerance", "20"),
        ("search", "fragment_tolerance", "0.5 Dalton"),
        ("search", "charges", 2),
        ("search", "charges", [2, "3"]),
        ("search", "charges", [2, True]),
        ("search", "isotope_errors", [0.0, 1.0]),
        ("search", "top_peaks", 150.0),
    ],
)
def test_wrong_types(section: str, key: str, value: object) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({section: {key: value}})
    assert key in str(e.value)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("database", "enzyme", "pepsin"),
        ("database", "specificity", "none"),
        ("database", "decoys", "shuffle"),
        ("search", "score", "andromeda"),
    ],
)
def test_bad_enum_values(section: str, key: str, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({section: {key: value}})
    msg = str(e.value)
    assert key in msg and value in msg


@pytest.mark.parametrize(
    ("section", "values", "needle"),
    [
        ("database", {"missed_cleavages": -1}, "missed_cleavages"),
        ("database", {"missed_cleavages": 11}, "missed_cleavages"),
        ("database", {"min_length": 10, "max_length": 9}, "min_length"),
        ("database", {"min_length": 0}, "min_length"),
        ("database", {"max_variable_mods": 7}, "max_variable_mods"),
        ("database", {"min_mass": 600, "max_mass": 500}, "min_mass"),
        ("database", {"bucket_size": 8}, "bucket_size"),
        ("search", {"charges": []}, "charges"),
        ("search", {"charges": [0, 2]}, "charges"),
        ("search", {"isotope_errors": [4]}, "isotope_errors"),
        ("search", {"top_peaks": 5}, "top_peaks"),
        ("search", {"candidates": 0}, "candidates"),
        ("search", {"max_fragment_charge": 5}, "max_fragment_charge"),
    ],
)
def test_out_of_range_values(section: str, values: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_config({section: values})


def test_section_must_be_a_table() -> None:
    with pytest.raises(ConfigError, match=r"\[database\]"):
        parse_config({"database": 5})


def test_load_config_error_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text('[search]\nprecursor_tolerance = "20 ppm"\nfragment_tolerence = "0.5 Da"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert str(path) in msg and "fragment_tolerence" in msg

    path.write_text('[search]\nprecursor_tolerance = "20 pp"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(path) in str(e.value) and "precursor_tolerance" in str(e.value)


def test_load_config_bad_toml(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[database\nenzyme = "trypsin"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(path) in str(e.value)
    assert "TOML" in str(e.value)
    # a repeated key is invalid TOML too
    path.write_text("[database]\nmin_length = 7\nmin_length = 8\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="broken.toml"):
        load_config(path)


def test_load_config_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="nope.toml"):
        load_config(path)


# --------------------------------------------------------------------------- choices, [library], moved keys


def test_every_choice_is_spelled_once_and_the_command_line_offers_it() -> None:
    from rtsearch.cli import parser
    from rtsearch.config import BackendChoice, LibraryMode, SpectraMode, choices

    assert choices(BackendChoice) == ("auto", "cupy", "numpy")
    assert choices(LibraryMode) == ("auto", "narrow", "open")
    sub = next(a for a in parser()._actions if a.dest == "command").choices  # type: ignore[attr-defined]
    for command in ("search", "serve", "demo"):
        backend = next(a for a in sub[command]._actions if a.dest == "backend")
        assert tuple(backend.choices) == choices(BackendChoice) and backend.default is None, command
    mode = next(a for a in sub["serve"]._actions if a.dest == "spectra_mode")
    assert tuple(mode.choices) == choices(SpectraMode)


def test_library_table() -> None:
    assert parse_config({}).library == LibraryConfig(open=False, open_window_da=500.0, gpu_mode="auto")
    cfg = parse_config({"library": {"open": True, "open_window_da": 250, "gpu_mode": "Narrow"}})
    assert cfg.library == LibraryConfig(open=True, open_window_da=250.0, gpu_mode="narrow")
    for bad, needle in (({"open_window_da": 0}, "open_window_da"), ({"gpu_mode": "dense"}, "gpu_mode"),
                        ({"open": "yes"}, "open"), ({"window": 5}, "window")):  # fmt: skip
        with pytest.raises(ConfigError, match=needle):
            parse_config({"library": bad})


def test_backend_is_a_search_setting_and_serve_backend_says_where_it_went() -> None:
    assert parse_config({"search": {"backend": "NumPy"}}).search.backend == "numpy"
    with pytest.raises(ConfigError, match=r"\[serve\] backend has moved to \[search\] backend"):
        parse_config({"serve": {"backend": "auto"}})
    with pytest.raises(ConfigError, match="backend"):
        parse_config({"search": {"backend": "opencl"}})


def test_tuning_knobs_come_from_the_environment_in_range_or_not_at_all(monkeypatch, caplog) -> None:
    from rtsearch.config import tuning
    from rtsearch.config.environment import NAMES

    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    assert all(v is None for v in dataclasses.astuple(tuning()))  # unset: each module's own default
    monkeypatch.setenv("RTSEARCH_EXPIRY_SLACK_MS", "5")
    monkeypatch.setenv("RTSEARCH_CLUSTER_DEPTH", "3")
    monkeypatch.setenv("RTSEARCH_CLUSTER_WORTH", "0")
    monkeypatch.setenv("RTSEARCH_GIVE_UP_BEHIND", "1")
    t = tuning()
    assert (t.expiry_slack_ms, t.cluster_depth, t.cluster_worth, t.give_up_behind) == (5.0, 3, False, True)
    assert type(t.cluster_depth) is int
    for name, bad in (("RTSEARCH_EXPIRY_SLACK_MS", "-1"), ("RTSEARCH_CLUSTER_DEPTH", "0"),
                      ("RTSEARCH_CLUSTER_DEPTH", "1.5"), ("RTSEARCH_GIL_SWITCH_S", "fast"),
                      ("RTSEARCH_SLOW_BATCH_S", "inf")):  # fmt: skip
        monkeypatch.setenv(name, bad)
        caplog.clear()
        assert getattr(tuning(), name.removeprefix("RTSEARCH_").lower()) is None, (name, bad)
        assert f"{name}={bad!r}" in caplog.text  # ignored, with a warning
        monkeypatch.delenv(name)


def test_a_knob_changes_what_the_daemon_does(monkeypatch) -> None:
    from rtsearch.serve.engine import pacing

    monkeypatch.delenv("RTSEARCH_CLUSTER_DEPTH", raising=False)
    assert (pacing.depth(), pacing.depth(2), pacing.depth(4)) == (2, 1, 1)
    monkeypatch.setenv("RTSEARCH_CLUSTER_DEPTH", "4")
    assert pacing.depth() == pacing.depth(2) == 4
