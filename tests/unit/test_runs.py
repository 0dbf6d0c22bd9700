"""LiveRun on the bundled real run: results per spectrum, running q-values, the live discriminant."""

from __future__ import annotations

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import RUN, TOML, bundled
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.features import FEATURES
from rtsearch.search import database
from rtsearch.search import live as runs
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.fdr import q_values
from rtsearch.search.live import LiveRun
from rtsearch.types import ResultStatus


@pytest.fixture(scope="module")
def scored(demo_index):
    cfg = load_config(bundled(TOML)).search
    spectra = list(read_spectra(bundled(RUN), default_charges=cfg.charges))
    target = DatabaseTarget(demo_index, cfg, get_backend("numpy"))
    return target, target.score(SpectraBatch.of(spectra))


def _feed(index, batch, size: int = 10) -> tuple[LiveRun, list[dict]]:
    live = LiveRun("r", index)
    out: list[dict] = []
    for s in range(0, len(batch), size):
        out.extend(live.add_scored(batch.take(range(s, min(s + size, len(batch))))).messages())
    return live, out


def test_one_result_per_spectrum_with_the_wire_fields(scored):
    index, batch = scored
    live, results = _feed(index, batch)
    assert [r["scan"] for r in results] == batch.scan.tolist()
    assert sum(live.by_status.values()) == len(batch) == 139
    for r in results:
        assert r["status"] in ("identified", "unidentified")
        if "peptide" in r:
            assert 0 <= r["q_value"] <= 1 and r["proteins"]
            assert r["status"] == "identified" or r["is_decoy"] or r["q_value"] > live.identified_at
        else:
            assert r["reason"]
    table, summary = live.finish()
    assert summary.spectra == 139 and summary.psms_at_5pct >= 85 and summary.psms_at_1pct == 0  # under 100 targets


def test_the_live_discriminant_is_refitted_and_reranks_everything(scored, monkeypatch):
    index, batch = scored
    monkeypatch.setattr(runs, "REFIT_FIRST", 500)
    _, raw = _feed(index, batch)  # 139 < REFIT_FIRST: primary score only
    monkeypatch.setattr(runs, "REFIT_FIRST", 40)
    live, fitted = _feed(index, batch)
    assert live.discriminant is not None
    assert live._next_fit == 160  # fitted at 40 and 80 scored spectra, next at 160
    # from the last refit on, the q of each new PSM is q_values over every PSM up to its batch, ranked
    # by that discriminant (it ranks all earlier PSMs again, not only the new ones)
    x, d = np.concatenate(live._x), np.concatenate(live._d)
    score = live.discriminant.score(x)
    got = np.array([r["q_value"] for r in fitted if "peptide" in r])
    ends = np.cumsum([sum("peptide" in r for r in fitted[s : s + 10]) for s in range(0, len(fitted), 10)])
    start = int(np.searchsorted(ends, 80))  # the batch whose PSMs crossed 80 triggered the last refit
    checked = 0
    for k in range(start, len(ends)):
        lo, hi = (ends[k - 1] if k else 0), ends[k]
        np.testing.assert_allclose(got[lo:hi], q_values(score[:hi], d[:hi])[lo:hi])
        checked += hi - lo
    assert checked >= 40
    ident = lambda rs: sum(r["status"] == ResultStatus.IDENTIFIED.value for r in rs)  # noqa: E731
    assert ident(fitted) >= ident(raw)


def test_no_running_q_before_the_run_holds_live_from_scored_psms(scored, monkeypatch):
    """PSMs answered while their run holds fewer than `LIVE_FROM` scored ones (their batch included) get q = 1 and
    are not identified, at any ``identified_at``; without that rule the demo run's first targets rank above every
    decoy, at q = 1 / targets (under 0.2 from the fifth target on)."""
    index, batch = scored
    monkeypatch.setattr(runs, "REFIT_FIRST", 500)  # the primary score throughout: the two feeds rank alike

    def feed() -> list[tuple[int, dict]]:
        live, out = LiveRun("r", index, identified_at=0.2), []
        for s in range(0, len(batch), 10):
            msgs = live.add_scored(batch.take(range(s, min(s + 10, len(batch))))).messages()
            out.extend((live._n_scored, r) for r in msgs if "peptide" in r)
        return out

    gated = feed()
    early = [r for n, r in gated if n < runs.LIVE_FROM]
    assert early and all(r["q_value"] == 1.0 and r["status"] == "unidentified" for r in early)
    assert any(r["status"] == "identified" for n, r in gated if n >= runs.LIVE_FROM)
    monkeypatch.setattr(runs, "LIVE_FROM", 0)
    ungated = feed()
    assert any(r["q_value"] <= 0.2 and r["status"] == "identified" for n, r in ungated[: len(early)])
    assert [r for n, r in ungated[len(early):]] == [r for n, r in gated[len(early):]]  # the rest as before


def test_the_live_fit_shrinks_as_the_run_end_fit(scored):
    index, _ = scored
    assert LiveRun("r", index).ridge == index.ridge == database.RIDGE


def test_no_refits_and_no_kept_features_beyond_refit_last(scored, monkeypatch):
    index, batch = scored
    monkeypatch.setattr(runs, "REFIT_FIRST", 40)
    monkeypatch.setattr(runs, "REFIT_LAST", 80)
    live, results = _feed(index, batch)
    assert live.discriminant is not None and live._next_fit == 160
    assert live._x == [] and live._d == []  # nothing kept once no refit can read it
    assert len(live.fdr) == sum("peptide" in r for r in results)  # every scored PSM still ranked


def test_deferred_refits_wait_for_install(scored, monkeypatch):
    index, batch = scored
    monkeypatch.setattr(runs, "REFIT_FIRST", 40)
    monkeypatch.setattr(runs, "REFIT_LAST", 80)
    live = LiveRun("r", index, refits="deferred", q_refresh=0.01)
    live.add_scored(batch.take(range(60)))
    assert live.discriminant is None  # nothing fitted behind the caller's back
    refit = live.refit_due()
    assert refit is not None and live.refit_due() is None  # one refit at a time
    live.add_scored(batch.take(range(60, len(batch))))  # scored while the refit "runs": primary score still
    assert live.discriminant is None
    q = live.install(refit())
    # every PSM so far, also those scored during the refit, is ranked by the new discriminant, exactly
    hit = batch.best.match >= 0
    x = batch.best.features[hit].copy()
    x[:, FEATURES.index("ppm_error_z2")] = np.abs(x[:, FEATURES.index("signed_ppm_error")])
    decoy = np.asarray(index.is_decoy(batch.best.match[hit]), dtype=bool)
    np.testing.assert_allclose(q, q_values(live.discriminant.score(x), decoy))
    assert len(live.fdr) == int(hit.sum())
    assert live._next_fit == 80  # the next refit is due already (138 scored): install it too
    second = live.refit_due()
    assert second is not None
    live.install(second())
    assert live._x == [] and live._next_fit == 160  # REFIT_LAST passed: nothing kept after install
    assert live.refit_due() is None
    inline, _ = _feed(index, batch.take(range(60)), size=60)
    assert inline.discriminant is not None  # inline: fitted in the call that crossed 40


def test_the_table_compacts_small_batches_in_order(scored):
    from rtsearch.search.table import COMPACT_EVERY, PsmTable

    index, batch = scored
    one, many = PsmTable(index), PsmTable(index)
    one.add(batch)
    for s in range(len(batch)):  # 139 batches of one spectrum
        many.add(batch.take([s]))
    assert len(many.batches) == 139 // COMPACT_EVERY + 139 % COMPACT_EVERY == 13
    assert len(many) == len(one) == 139
    one.finalize()
    many.finalize()
    a, b = one.columns(), many.columns()
    assert list(a["scan"]) == list(b["scan"]) == batch.scan.tolist()
    assert a["peptide"] == b["peptide"] and a["proteins"] == b["proteins"]
    np.testing.assert_array_equal(a["q_value"], b["q_value"])
