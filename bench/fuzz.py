"""The fuzz harness at scale: a million hostile messages with known outcomes through a real daemon, in rounds.

The generator and the check are the tests' (`tests/hostile.py`): every class an adversarial client
found (issues 15 and 67) mixed with valid spectra of the bundled E. coli run. The daemon is ``rtsearch serve``
(NumPy, the demo's index) in a process of its own on free loopback ports, as deployed; the messages go in over
PUSH → PULL as fast as the socket takes them, a collector reads every result. Each round's runs are its own and end
(``run.end``) with the round, so their memory is the daemon's to give back: after each round the daemon's resident
memory (its own ``process_resident_memory_bytes``) is read, and ``rss_flat`` says whether every round after the first
ended within 10 % of where the first did (issue 67, S10: 562 → 841 → 872 → 932 MB over four rounds before).
Prints one JSON object: per round, the messages, seconds, RSS and the check's counts (unanswered answerable,
answered twice, unexpected, wrong status, invalid counts by reason against those expected); whether the daemon
stayed up (crashes) and anything was left unanswered (hangs).

    python3 bench/fuzz.py --messages 1000000 --json out.json
    python3 bench/fuzz.py --messages 40000 --rounds 4

The messages are made while they are sent and only their expected outcomes kept (issue 67's classes hold
headers of 30-70 kB: a million messages made up front held ~3 GB).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulators"))

from bench.harness import emit  # noqa: E402
from rtsearch.cli.demo import RUN, TOML, bundled, cached_index, default_cache  # noqa: E402
from rtsearch.protocol.wire import RUN_END  # noqa: E402
from rtsearch_sim.collector import Collector  # noqa: E402
from rtsearch_sim.replay import Sender, load_run  # noqa: E402
from tests.hostile import Hostile, check, hostile_messages  # noqa: E402
from tests.streaming import ServeProcess, free_port, scrape  # noqa: E402

CODES = ("frames", "topic", "header", "version", "field", "peaks")
FLAT = 0.10  # rounds after the first end within this share of its resident memory


def _round(args: argparse.Namespace, k: int, spectra: list[Any], ends: tuple[str, str, int]) -> dict[str, Any]:
    """Round ``k``: its messages sent, answered and checked; the daemon's counts and memory after it."""
    spectra_ep, results_ep, metrics_port = ends
    runs = (f"fuzz-a-{k}", f"fuzz-b-{k}")

    def made() -> Any:
        return hostile_messages(spectra, args.messages, seed=args.seed + k, valid_share=args.valid_share, runs=runs)

    # the outcomes first (the collector must know how many answers to wait for), then the same messages again,
    # made as they are sent: seeded, so the same
    sent = [dataclasses.replace(h, frames=[]) for h in made()]
    answerable = sum(h.answer is not None for h in sent)
    before = scrape(metrics_port)
    col = Collector(results_ep).start()
    t = time.perf_counter()
    again: list[Hostile] = []
    with Sender(spectra_ep, mode="push", wait_s=60) as s:
        for h in made():
            s.send(h.frames)
            again.append(dataclasses.replace(h, frames=[]))
        for run in runs:  # the round's runs end: what they hold is the daemon's to give back (no n_spectra: the
            s.send([RUN_END, json.dumps({"v": 1, "run": run}).encode()])  # MS1 of each run are not told apart)
    assert again == sent  # the same messages as counted
    col.wait(answerable, idle_s=args.idle_s, timeout_s=args.timeout_s)
    col.stop()
    seconds = time.perf_counter() - t
    time.sleep(args.settle_s)  # the runs' ends written, the heap given back
    after = scrape(metrics_port)
    counted = {c: after.get(f'rtsearch_invalid_total{{reason="{c}"}}', 0.0) -
               before.get(f'rtsearch_invalid_total{{reason="{c}"}}', 0.0) for c in CODES}  # fmt: skip
    outcome = check(sent, col.results(), counted)
    return {
        "round": k, "messages": len(sent), "answerable": answerable, "classes": len({h.kind for h in sent}),
        "send_and_answer_s": round(seconds, 1), "messages_per_s": round(len(sent) / seconds),
        "rss_mb": round(after["process_resident_memory_bytes"] / 1e6, 1), "ready": after.get("rtsearch_ready"),
        "unanswered": len(outcome.missing), "answered_twice": len(outcome.twice),
        "unexpected": len(outcome.unexpected), "wrong_status": len(outcome.wrong_status),
        "invalid_counted": outcome.invalid_counted, "invalid_expected": outcome.invalid_expected, "ok": outcome.ok,
    }  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    index, _ = cached_index(default_cache())
    spectra = [s for s in load_run(bundled(RUN)) if s.ms_level == 2]
    with tempfile.TemporaryDirectory() as tmp:
        sp, rp, mp = free_port(), free_port(), free_port()
        daemon = ServeProcess(["--index", str(index.folder), "--config", str(bundled(TOML)), "--backend",
                               args.backend, "--spectra", f"tcp://127.0.0.1:{sp}", "--spectra-mode", "pull",
                               "--results", f"tcp://127.0.0.1:{rp}", "--metrics-port", str(mp), "--results-dir",
                               str(Path(tmp) / "results")])  # fmt: skip
        rounds: list[dict[str, Any]] = []
        try:
            if not daemon.wait_for(" ready: ", 300):
                raise SystemExit(f"the daemon did not become ready:\n{daemon.log[-3000:]}")
            for k in range(args.rounds):
                rounds.append(_round(args, k, spectra, (f"tcp://127.0.0.1:{sp}", f"tcp://127.0.0.1:{rp}", mp)))
                print(json.dumps(rounds[-1]), file=sys.stderr)
                if daemon.proc.poll() is not None:
                    break
            up = daemon.proc.poll() is None
        finally:
            daemon.proc.terminate()
            daemon.proc.wait(300)
    first = rounds[0]["rss_mb"] if rounds else 0.0
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"), "backend": args.backend, "rounds": rounds,
        "crashes": 0 if up else 1, "hangs": int(any(r["unanswered"] for r in rounds)),
        "rss_mb": [r["rss_mb"] for r in rounds], "rss_flat": all(r["rss_mb"] <= first * (1 + FLAT) for r in rounds),
        "ok": all(r["ok"] for r in rounds),
    }  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=1_000_000, help="messages a round")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--valid-share", type=float, default=0.02, help="valid MS2 spectra among them (default 0.02)")
    p.add_argument("--seed", type=int, default=15, help="round k's messages: seed + k")
    p.add_argument("--backend", default="numpy", choices=["auto", "cupy", "numpy"])
    p.add_argument("--idle-s", type=float, default=60.0, help="results stop coming for this long: done")
    p.add_argument("--settle-s", type=float, default=5.0, help="after a round, before its memory is read")
    p.add_argument("--timeout-s", type=float, default=3600.0)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    res = run(args)
    emit(res, args.json)
    return 0 if res["ok"] and not res["crashes"] and res["rss_flat"] else 1


if __name__ == "__main__":
    sys.exit(main())
