"""rtload_bench's phases read back (`bench.rtload_summary`, `bench.serving.stage_means`): golden values by hand."""

from __future__ import annotations

from pathlib import Path

from bench.rtload_summary import gpu_use, rows
from bench.serving import stage_means


def _phase(tag: str, wall: tuple[float, float], batches: float, spectra: float, **extra: object) -> dict:
    metrics = {'rtsearch_batch_size_count{lane="0"}': batches / 2, 'rtsearch_batch_size_count{lane="1"}': batches / 2,
               'rtsearch_batch_size_sum{lane="0"}': spectra / 2, 'rtsearch_batch_size_sum{lane="1"}': spectra / 2}
    return {"phase": tag, "offered_hz": 1000.0, "answered": 10, "lost": 0, "duplicates": 0, "statuses": {"shed": 2},
            "latency_ms": {"p50": 1.0, "p99": 2.0, "max": 3.0}, "wall": list(wall), "daemon_metrics": metrics,
            **extra}  # fmt: skip


def test_batches_differenced_by_daemon_and_counted_afresh_when_one_restarts(tmp_path: Path) -> None:
    phases = [
        _phase("daemon base", (100.0, 110.0), 10, 10),  # 10 batches of 1
        _phase("daemon base", (110.0, 120.0), 30, 410),  # then 20 batches of 400 spectra: 20
        _phase("daemon main", (120.0, 130.0), 4, 40),  # another daemon: its own counts
        _phase("overload main", (130.0, 140.0), 14, 240),  # the same daemon, another tag: 200 / 10
        _phase("daemon base", (140.0, 150.0), 5, 25),  # base started again: counted from 0
        {**_phase("floor", (150.0, 151.0), 0, 0), "daemon_metrics": None},  # no daemon: no batches
    ]
    csv_path = tmp_path / "gpu_use.csv"
    csv_path.write_text("timestamp, index, utilization.gpu [%], memory.used [MiB]\n"
                        "1970/01/01 00:01:45.000, 0, 20 %, 100 MiB\n"  # 105 s: the first phase
                        "1970/01/01 00:01:49.500, 0, 30 %, 100 MiB\n"  # 109.5 s: the first phase
                        "1970/01/01 00:01:55.000, 0, 50 %, 100 MiB\n")  # 115 s: the second  # fmt: skip
    got = rows(phases, gpu_use(csv_path))
    assert [r["batch"] for r in got] == [1.0, 20.0, 10.0, 20.0, 5.0, None]
    assert [r["gpu_use"] for r in got][:3] == [25.0, 50.0, None]
    assert got[0]["shed"] == 2 and got[0]["p99"] == 2.0


def test_stage_means_over_a_phase_summed_over_lanes() -> None:
    def reading(n0: float, s0: float, n1: float, s1: float) -> dict[str, float]:
        return {'rtsearch_engine_batch_seconds_count{lane="0"}': n0, 'rtsearch_engine_batch_seconds_sum{lane="0"}': s0,
                'rtsearch_engine_batch_seconds_count{lane="1"}': n1, 'rtsearch_engine_batch_seconds_sum{lane="1"}': s1,
                'rtsearch_latency_seconds_count{lane="0"}': n0,
                'rtsearch_latency_seconds_sum{lane="0"}': s0}  # fmt: skip

    before, after = reading(10, 1.0, 0, 0.0), reading(30, 1.1, 20, 0.3)
    # engine: (0.1 + 0.3) s over 40 batches = 10 ms; latency: lane 0 only, 0.1 s over 20 = 5 ms; stages with no
    # observation in the phase are left out
    assert stage_means(before, after) == {"engine_batch": 10.0, "latency": 5.0}
    assert stage_means(after, after) == {}


def test_cores_busy_on_the_host_and_in_the_daemon(tmp_path: Path) -> None:
    from bench.serving import busy_cores, host_ticks

    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal: busy 100+0+50+0+0+10 = 160 of 400 ticks
    stat.write_text("cpu  100 0 50 200 40 0 0 10 0 0\ncpu0 1 2 3 4 5 6 7 8\n")
    assert host_ticks(stat) == (160, 400)
    # 160 more busy ticks of 200 more: 0.8 of 16 cores
    assert busy_cores((160, 400), (320, 600), 16) == 12.8
    assert busy_cores((160, 400), (160, 400), 16) == 0.0
    phase = _phase("daemon main", (100.0, 110.0), 10, 10, host_busy_cores=[12.8, 16],
                   cpu_s={"lane_0/lane_0": 20.0, "intake_0/intake_0": 5.0})  # fmt: skip
    got = rows([phase], [])[0]
    assert got["host_cores"] == "12.8/16" and got["daemon_cores"] == 2.5  # 25 CPU s over 10 s
    assert rows([_phase("floor", (0.0, 1.0), 0, 0)], [])[0]["daemon_cores"] is None


def test_cpu_an_answered_spectrum_by_kind_of_process() -> None:
    from bench.rtload_summary import cpu_per_spectrum

    cpu_s = {"daemon/loop": 0.5, "daemon/ZMQbg/IO/0": 0.5, "lane_0/lane_0": 2.0, "lane_1/results": 1.0,
             "intake_0/intake_0": 3.0, "intake_3/ZMQbg/IO/0": 1.0, "refit/refit": 0.2}  # fmt: skip
    # 100,000 answered: intake 4 s → 40 µs, lane 3 s → 30, the front 1 s → 10, refit 0.2 s → 2; costliest first
    assert cpu_per_spectrum(cpu_s, 100_000) == {"intake": 40.0, "lane": 30.0, "daemon": 10.0, "refit": 2.0}
    assert list(cpu_per_spectrum(cpu_s, 100_000)) == ["intake", "lane", "daemon", "refit"]
    assert cpu_per_spectrum(cpu_s, 0) == {}


def test_variants_grouped_across_calls_by_setting() -> None:
    from bench.rtload_summary import grouped

    def daemon(label: str, rate: float, p99: float) -> dict:
        return {"phase": f"daemon main[{label}]", "offered_hz": rate, "latency_ms": {"p99": p99}}

    call1 = [{"phase": "floor", "offered_hz": 200.0, "latency_ms": {"p99": 1.0}},  # no daemon: left out
             daemon("lanes4", 60000.0, 50.0), daemon("fl2", 60000.0, 40.0), daemon("fl2", 80000.0, 60.0),
             {"phase": "overload main", "offered_hz": 60000.0, "latency_ms": {"p99": 9.0}}]  # not a daemon row
    call2 = [daemon("old", 60000.0, 70.0), daemon("new", 60000.0, 45.0), daemon("other", 60000.0, 1.0)]
    got = grouped([call1, call2], {"1ms": {"lanes4", "old"}, "2ms": {"fl2", "new"}})
    assert got == {("1ms", 60000.0): [50.0, 70.0], ("2ms", 60000.0): [40.0, 45.0], ("2ms", 80000.0): [60.0]}


def test_checkouts_without_labels_grouped_by_name_and_the_taps_p99s_apart() -> None:
    """``--code base --code .`` names daemons ``daemon base`` and ``daemon main``: grouped by those names; a group
    named with ``tap`` takes the lighter subscriber's p99 (``rtload_bench.py --tap``), where the phase has one."""
    from bench.rtload_summary import grouped

    def daemon(name: str, p99: float, tap: float | None) -> dict:
        return {"phase": f"daemon {name}", "offered_hz": 100000.0, "latency_ms": {"p99": p99},
                **({"tap_ms": {"n": 10, "sent_p99": tap}} if tap is not None else {})}  # fmt: skip

    phases = [daemon("base", 300.0, 80.0), daemon("main", 120.0, 60.0), daemon("base", 90.0, None)]
    got = grouped([phases], {"base": {"base"}, "main": {"main"}, "base-tap": {"base"}})
    assert got == {("base", 100000.0): [300.0, 90.0], ("main", 100000.0): [120.0], ("base-tap", 100000.0): [80.0]}
