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
