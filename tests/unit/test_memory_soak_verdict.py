"""`bench/memory_soak.py`'s verdict: each minute's trough, median and peak, and their growth over the first minute's,
on samples built by hand (values worked out below)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.memory_soak import minute_stats, verdict

ROOT = Path(__file__).resolve().parents[2]


def samples(values: list[float], every_s: float = 10.0, t0: float = 1000.0) -> list[dict]:
    return [{"t": t0 + k * every_s, "pss_mb": v, "rss_mb": 2 * v, "anon_mb": v / 2} for k, v in enumerate(values)]


# three whole minutes of six samples (a tooth in each: a run's PSMs held until it ends), then one lone sample
MINUTES = [100, 120, 150, 110, 100, 105] + [104, 130, 160, 112, 103, 106] + [106, 125, 165, 115, 108, 107] + [300]


def test_each_minute_has_its_trough_median_and_peak_and_a_lone_last_sample_is_no_minute() -> None:
    troughs, medians, peaks = minute_stats(samples(MINUTES))
    assert troughs == [100, 103, 106]
    assert medians == [107.5, 109.0, 111.5]  # each minute's middle two of six: (105+110)/2, (106+112)/2, (108+115)/2
    assert peaks == [150, 160, 165]  # the 300 alone, in a fourth minute, is left out


def test_the_verdict_compares_every_minute_with_the_first() -> None:
    v = verdict(samples(MINUTES), warm_t=1000.0)
    assert v["trend_growth"] == round(111.5 / 107.5 - 1, 4)
    assert v["trough_growth"] == 0.06 and v["peak_growth"] == 0.1
    assert v["growth"] == 2.0 and v["last_growth"] == 2.0  # the largest sample (300) over the first (100)
    assert v["minutes_watched"] == round(18 * 10 / 60, 2)


def test_a_saved_soak_is_judged_again_from_its_warm_phase(tmp_path: Path) -> None:
    saved = {"samples": samples(MINUTES, t0=970.0), "phases": [{"t": 1000.0}, {"t": 1030.0}], "warm_phases": 1}
    (tmp_path / "soak.json").write_text(json.dumps(saved))
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "memory_soak.py"), "--verdict",
                          str(tmp_path / "soak.json")], capture_output=True, text=True, check=True).stdout  # fmt: skip
    v = json.loads(out)
    assert v["warm_pss_mb"] == 110  # the first sample at or after phase 1's end: t = 1000, the fourth (970 + 3 × 10)
    explicit = subprocess.run([sys.executable, str(ROOT / "bench" / "memory_soak.py"), "--verdict",
                               str(tmp_path / "soak.json"), "--warm-phases", "2"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert json.loads(explicit)["warm_pss_mb"] == 104  # from phase 2's end: t = 1030, the seventh
