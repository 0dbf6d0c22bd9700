"""The fuzz harness at scale: a million hostile messages with known outcomes through a real daemon.

The generator and the check are the tests' (`tests/hostile.py`): every class an adversarial client
found (issue 15) mixed with valid spectra of the bundled E. coli run; the daemon (NumPy, the demo's
index) runs in this process on free loopback ports, the messages go in over PUSH → PULL as fast as
the socket takes them, a collector reads every result. Prints one JSON object: messages, seconds,
whether the daemon stayed up (crashes), whether anything was left unanswered when the results
stopped coming (hangs), and the check's counts (unanswered answerable, answered twice, unexpected,
wrong status, invalid counts by reason against those expected).

    python3 bench/fuzz_bench.py --messages 1000000 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from rtsearch.cli.demo import RUN, TOML, bundled, cached_index, default_cache  # noqa: E402
from rtsearch.config import ServeConfig, load_config  # noqa: E402
from rtsearch.scoring.backend import get_backend  # noqa: E402
from rtsearch.search.database import DatabaseTarget  # noqa: E402
from rtsearch.serve.daemon import Daemon  # noqa: E402
from rtsearch_sim.collector import Collector  # noqa: E402
from rtsearch_sim.replay import Sender, load_run  # noqa: E402
from tests.hostile import check, hostile_messages  # noqa: E402

CODES = ("frames", "topic", "header", "version", "field", "peaks")


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    index, _ = cached_index(default_cache())
    target = DatabaseTarget(index, load_config(bundled(TOML)).search, get_backend(args.backend))
    spectra = [s for s in load_run(bundled(RUN)) if s.ms_level == 2]
    t0 = time.perf_counter()
    sent = list(hostile_messages(spectra, args.messages, seed=args.seed, valid_share=args.valid_share))
    made_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        cfg = ServeConfig(spectra="tcp://127.0.0.1:*", spectra_mode="pull", results="tcp://127.0.0.1:*",
                          metrics_port=0, results_dir=str(Path(tmp) / "results"))  # fmt: skip
        stop = asyncio.Event()
        daemon = Daemon(target, cfg)
        task = asyncio.create_task(daemon.run(stop))
        await asyncio.wait_for(daemon.ready.wait(), 120)
        answerable = sum(h.answer is not None for h in sent)

        def push_and_collect() -> tuple[Collector, float]:
            col = Collector(daemon.endpoints.results).start()
            t = time.perf_counter()
            with Sender(daemon.endpoints.spectra, mode="push", wait_s=60) as s:
                for h in sent:
                    s.send(h.frames)
            col.wait(answerable, idle_s=args.idle_s, timeout_s=args.timeout_s)
            col.stop()
            return col, time.perf_counter() - t

        col, seconds = await asyncio.to_thread(push_and_collect)
        up = not task.done()
        sample = daemon.metrics.registry.get_sample_value
        ready = sample("rtsearch_ready")
        counted = {c: sample("rtsearch_invalid_total", {"reason": c}) or 0.0 for c in CODES}
        stop.set()
        await asyncio.wait_for(task, 300)
    outcome = check(sent, col.results(), counted)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"), "backend": target.backend.name, "device": target.backend.device,
        "messages": len(sent), "answerable": answerable, "valid_ms2": sum(h.kind == "valid MS2" for h in sent),
        "classes": len({h.kind for h in sent}), "generate_s": round(made_s, 1), "send_and_answer_s": round(seconds, 1),
        "messages_per_s": round(len(sent) / seconds), "crashes": 0 if up else 1, "ready_at_end": ready,
        "hangs": 1 if outcome.missing else 0, "unanswered": len(outcome.missing), "answered_twice": len(outcome.twice),
        "unexpected": len(outcome.unexpected), "wrong_status": len(outcome.wrong_status),
        "invalid_counted": outcome.invalid_counted, "invalid_expected": outcome.invalid_expected, "ok": outcome.ok,
    }  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--valid-share", type=float, default=0.02, help="valid MS2 spectra among them (default 0.02)")
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--backend", default="numpy", choices=["auto", "cupy", "numpy"])
    p.add_argument("--idle-s", type=float, default=60.0, help="results stop coming for this long: done")
    p.add_argument("--timeout-s", type=float, default=3600.0)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    res = asyncio.run(main_async(args))
    text = json.dumps(res, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0 if res["ok"] and not res["crashes"] else 1


if __name__ == "__main__":
    sys.exit(main())
