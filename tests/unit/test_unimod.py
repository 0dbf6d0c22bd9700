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


def test_unimod_lists_each_modifications_sites() -> None:
    from rtsearch.database import unimod

    # Unimod 21's specificities, hidden ones included (unimod.org, Phospho)
    assert unimod.sites("Phospho") == frozenset("CDEHKRSTY")
    assert unimod.sites("UNIMOD:21") == unimod.sites("phospho") == unimod.sites("Phospho")
    assert unimod.sites("Gln->pyro-Glu") == frozenset("Q")
    assert "N-term" in unimod.sites("Acetyl") and "K" in unimod.sites("Acetyl")
    assert unimod.sites("NoSuchThing") is None


def test_a_site_unimod_does_not_list_is_warned_about_once(caplog) -> None:
    with caplog.at_level("WARNING", logger="rtsearch.database.mods"):
        for text in ("Phospho@STY", "Oxidation@M", "Acetyl@Protein N-term", "Gln->pyro-Glu@N-term Q", "+79.97@W",
                     "Carbamidomethyl@C", "TMT6plex@N-term"):
            parse_mod(text)
        assert caplog.records == []
        parse_mod("Phospho@W")
        parse_mod("Phospho@W")
        parse_mod("Gln->pyro-Glu@C-term")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["modification 'Phospho@W': Unimod lists Phospho on C, D, E, H, K, R, S, T, Y, not on W",
                        "modification 'Gln->pyro-Glu@c-term': Unimod lists Gln->pyro-Glu on Q, not on C-term"]


@pytest.mark.parametrize("site", ["N-terminus", "C-terminal", "Protein N-terminus", "N-termQ"])
def test_text_run_on_after_a_terminus_is_refused(site) -> None:
    with pytest.raises(ConfigError, match="bad site"):
        parse_mod(f"Acetyl@{site}")
    assert parse_mod("Acetyl@N-term: K").residues == "K"  # a colon or a space before residues


def test_the_bundled_unimod_table_is_still_where_psims_kept_it() -> None:
    """`rtsearch.database.unimod` reads the Unimod tables psims ships by their path in its package (importing psims
    would cost 0.33 s a process); pyproject pins psims below the next minor version, and this fails loudly, naming
    the path, if a psims in range moves the file."""
    from rtsearch.database import unimod

    assert unimod.table_path().is_file(), f"psims moved {'/'.join(unimod.VENDORED)}"
    assert len(unimod._table()[0]) > 1500
