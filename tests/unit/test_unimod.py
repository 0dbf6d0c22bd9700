"""Modifications by any Unimod name or accession (`rtsearch.database.unimod`, psims' bundled Unimod tables)."""

from __future__ import annotations

import pytest

from rtsearch.database.mods import UNIMOD, parse_mod
from rtsearch.errors import ConfigError


def test_names_beyond_the_common_ones_resolve_to_unimod_masses() -> None:
    silac = parse_mod("Label:13C(6)@R")  # SILAC heavy arginine: Unimod 188, C(-6) 13C(6)
    assert silac.delta == pytest.approx(6.020129) and silac.residues == "R"
    assert parse_mod("UNIMOD:188@R").delta == silac.delta
    assert parse_mod("label:13c(6)15n(4)@R").delta == pytest.approx(10.008269)  # any case
    assert parse_mod("Biotin@K").delta == pytest.approx(226.077598)
    # the common ones keep their table's values, and agree with Unimod's
    for name in ("Carbamidomethyl", "Oxidation", "Phospho", "TMTpro", "iTRAQ8plex"):
        assert parse_mod(f"{name}@K").delta == UNIMOD[name]


def test_a_misspelt_name_is_one_clear_error_with_suggestions() -> None:
    with pytest.raises(ConfigError, match="did you mean 'Carbamidomethyl'"):
        parse_mod("Carbamidometyl@C")
    with pytest.raises(ConfigError, match="not a Unimod name"):
        parse_mod("NoSuchThing@C")
