"""The elution tracker's process (`rtsearch.serve.outputs.elution_process`): items applied in order with a run's
consecutive scans at once, a bad item skipped, a round trip through the spawned child, and the elution output starting
another when it dies."""

from __future__ import annotations

import math

import numpy as np

from rtsearch.serve.outputs.elution_process import TrackerProcess, apply
from rtsearch.signal.live import ElutionTracker


def _scan(rt: float) -> tuple[str, str, float, np.ndarray, np.ndarray]:
    v = 1e6 * math.exp(-0.5 * ((rt - 60.0) / 5.0) ** 2) + 10.0
    return ("scan", "r", rt, np.array([300.0, 500.2701, 800.0]), np.array([50.0, v, 50.0]))


def _items() -> list[tuple[object, ...]]:
    times = [float(t) for t in np.arange(0.0, 150.0, 1.5)]
    bad = ("watch", "r", np.array([1, 2]), np.array([612.3]), np.array([2]), np.array([44.0]))  # unequal lengths
    watch = ("watch", "r", np.array([7]), np.array([500.2702]), np.array([2]), np.array([44.0]))
    return [*(_scan(t) for t in times[:30]), bad, watch, *(_scan(t) for t in times[30:]), ("end", "r")]


def test_items_apply_in_order_and_a_bad_one_is_skipped() -> None:
    tracker = ElutionTracker()
    events = apply(tracker, _items())
    assert [(e.scan, e.kind, e.apex_rt) for e in events] == [(7, "apex", 60.0), (7, "end", 60.0)]
    assert "r" not in tracker.runs  # the run's end forgot it


def test_the_process_returns_what_the_tracker_returns() -> None:
    items = _items()
    with TrackerProcess("numpy") as proc:
        assert proc.call(items[:31]) == ([], 0)  # the bad watch skipped, nothing followed yet
        events, followed = proc.call(items[31:-1])
        last, _ = proc.call(items[-1:])
    assert followed == 0 and [e.kind for e in events + last] == ["apex", "end"]


def test_an_elution_output_whose_tracker_process_dies_starts_another_and_goes_on() -> None:
    import asyncio

    import orjson
    import zmq

    from rtsearch.config import ServeConfig
    from rtsearch.serve.observe.stats import Elution
    from rtsearch.serve.outputs import OutputContext
    from rtsearch.serve.outputs.elution import ElutionOutput

    async def main() -> tuple[list[dict], list[object], ElutionOutput]:
        ctx = zmq.Context.instance()
        pull = ctx.socket(zmq.PULL)
        pull.bind("inproc://elution-restart")
        stats: list[object] = []
        out = ElutionOutput()
        await out.start(OutputContext(ServeConfig(), "numpy", "inproc://elution-restart", stats.append,
                                      asyncio.get_running_loop(), lambda kind, run, body: None))  # fmt: skip

        async def idle() -> None:
            for _ in range(600):  # generous: a spawned process's start on a busy machine
                if out.idle():
                    return
                await asyncio.sleep(0.1)
            raise AssertionError("the elution thread did not catch up")

        def feed(run: str, items: list[tuple[object, ...]]) -> None:
            for kind, _, *rest in items:
                if kind == "scan":
                    out.scan(run, *rest)  # type: ignore[arg-type]
                elif kind == "watch":
                    out.watch(run, *rest)  # type: ignore[arg-type]
                else:
                    out.end_run(run)

        try:
            items = _items()
            feed("before", items[:40])
            await idle()
            assert out._tracker is not None
            out._tracker.child.kill()  # the tracker process dies mid-run
            feed("before", items[40:])  # the first list after it is lost with its follows; the thread starts another
            await idle()
            assert out.restarts == 1 and out.check() is None and out.dropped > 0
            feed("after", items)  # a whole elution through the new process
            await idle()
        finally:
            out.close()  # (a failed check must not leave its thread and process behind)
        events = []
        while pull.poll(100):
            events.append(orjson.loads(pull.recv_multipart()[1]))
        pull.close()
        return events, stats, out

    events, stats, out = asyncio.run(main())
    assert [(e["run"], e["event"], e["apex_rt"]) for e in events if e["run"] == "after"] == [
        ("after", "apex", 60.0), ("after", "end", 60.0)]
    assert any(isinstance(s, Elution) and s.dropped for s in stats)
    assert out.check() is None  # closed: not a failure
