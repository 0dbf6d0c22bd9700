"""Issue 21's Done-when figures read across one call's runs (`bench.cluster_summary`): golden values by hand."""

from __future__ import annotations

from bench.cluster_reading import gpus_of
from bench.cluster_summary import capacity, efficiencies, lane_cpu_s, mode, report, variants


def _row(config: str, offered: float, scored: float, p99: float, lost: int = 0) -> dict:
    return {"phase": "serve", "config": config, "offered_hz": offered, "scored_per_s": scored, "lost": lost,
            "duplicates": 0, "latency_ms": {"p99": p99}, "statuses": {}, "mean_batch": 1.0}  # fmt: skip


def test_a_configurations_capacity_is_its_best_rate_within_the_p99_and_lossless():
    rows = [_row("2:lanes:1:1", 10000, 10000, 30.0), _row("2:lanes:1:1", 13000, 12500, 49.0),
            _row("2:lanes:1:1", 16000, 13000, 51.0),  # over 50 ms: not a capacity
            _row("2:lanes:1:1", 14500, 12900, 45.0, lost=1),  # a spectrum lost: not one either
            _row("2:lanes:2:1", 19000, 5000, 60.0)]  # no rate within: 0  # fmt: skip
    assert capacity(rows) == {"2:lanes:1:1": (12500, 13000, 49.0), "2:lanes:2:1": (0.0, 0.0, 0.0)}


def test_each_modes_efficiency_is_its_best_on_n_gpus_against_twice_its_best_on_one():
    caps = {"2:lanes:1:1": (13681.0, 0, 0), "4:lanes:1:1": (13744.0, 0, 0), "4:lanes:2:1": (25218.0, 0, 0),
            "2:lanes:2:1": (24745.0, 0, 0), "4:lanes:1:2:partition": (12925.0, 0, 0),
            "4:lanes:2:2:partition": (18992.0, 0, 0)}  # fmt: skip
    eff = efficiencies(caps)
    # replicate: 25,218 / (2 × 13,744) = 0.9174; partition: 18,992 / (2 × 12,925) = 0.7347
    assert eff["replicate"] == {"one_gpu": ("4:lanes:1:1", 13744.0), "n_gpus": ("4:lanes:2:1", 25218.0),
                                "efficiency": 0.917}  # fmt: skip
    assert eff["partition"]["efficiency"] == 0.735
    assert gpus_of("4:lanes:2:2:partition") == 2 and gpus_of("2:replicate") == 2 and gpus_of("one engine") == 1
    assert mode("4:lanes:2:4:partition") == "partition" and mode("4:lanes:2:1") == "replicate"


def test_no_efficiency_without_both_gpu_counts():
    assert efficiencies({"2:lanes:1:1": (13000.0, 0, 0)}) == {}


def test_an_ab_runs_figures_are_read_apart_from_the_calls():
    rows = [{"run": "par", **_row("4:lanes:1:2:partition", 9000, 9000, 40.0)},
            {"run": "rep2", **_row("4:lanes:2:1", 25000, 24000, 45.0)},
            {"run": "par_ab", **_row("4:lanes:1:2:partition", 12000, 11000, 45.0)}]  # fmt: skip
    assert variants(rows) == {"": ("par", "rep2"), "par_ab": ("par_ab",)}
    out = report(rows)
    assert "capacity 4:lanes:1:2:partition        9000 /s (offered 9000, p99 40.0)\n" in out
    assert out.endswith("capacity 4:lanes:1:2:partition       11000 /s (offered 12000, p99 45.0) [par_ab]")


def test_a_rows_busiest_lane_is_its_threads_cpu_summed():
    row = {"cpu_s": {"lane_0/lane_0": 1.3, "lane_0/results": 0.4, "lane_1/lane_1": 1.0, "w0/w0": 5.0, "wall": 7.0}}
    assert lane_cpu_s(row) == 1.7 and lane_cpu_s({"cpu_s": {"wall": 7.0}}) is None


def test_a_configuration_that_did_not_start_is_said_and_left_out_of_the_capacities():
    # bench/cluster_bench.py goes on to the next configuration and records why (a lane's port taken, 2026-11-29)
    rows = [{"run": "rep1", **_row("4:lanes:1:1", 12000, 12000, 45.0)},
            {"run": "rep1", "phase": "not_started", "config": "8:lanes:1:1",
             "why": "lane 5: metrics port 127.0.0.1:43067: Address already in use"}]  # fmt: skip
    out = report(rows)
    assert "rep1     8:lanes:1:1              did not start: lane 5: metrics port" in out
    assert capacity(rows) == {"4:lanes:1:1": (12000, 12000, 45.0)}
