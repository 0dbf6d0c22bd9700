"""The fuzz harness: 10,000 hostile messages with known outcomes through a real daemon over ZeroMQ.

Every class an adversarial client found (issue 15; `tests.hostile`) mixed with valid spectra of a
real run, pushed as fast as the socket takes them. The daemon must stay ready, answer every
answerable message exactly once (``invalid`` where malformed), count every malformed one under
its reason, and still answer a spectrum sent afterwards. Before issue 15, the first spectrum with
a scan of 2**63 ended the daemon (exit code 0), a budget of 1e300 killed its engine thread, and a
run name with a lone surrogate ended it too.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses

import pytest

from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.protocol.wire import encode_run_end, encode_spectrum
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, load_run
from tests.hostile import Hostile, check, hostile_messages
from tests.streaming import running, serve_config

N_MESSAGES = 10_000  # every one of the 39 kinds 185 times or more (seed 15); 20,000 cost CI 27 s more


def _push_and_collect(spectra_ep: str, results_ep: str, messages: list[list[bytes]], expected: int) -> Collector:
    col = Collector(results_ep).start()
    try:
        with Sender(spectra_ep, mode="push", wait_s=20) as sender:
            for frames in messages:
                sender.send(frames)
        col.wait(expected, idle_s=30, timeout_s=600)
    finally:
        col.stop()
    return col


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("publishers", [0, 2], ids=["answers sent by the workers", "by publisher processes"])
async def test_hostile_messages_never_stop_the_daemon(demo_index, data, tmp_path, publishers):
    spectra = [s for s in load_run(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2]
    sent: list[Hostile] = list(hostile_messages(spectra, N_MESSAGES, seed=15))
    kinds = collections.Counter(h.kind for h in sent if h.kind != "run.start")
    assert len(kinds) >= 38 and min(kinds.values()) >= 100, kinds  # every class, many times
    answers = {h.answer: h for h in sent if h.answer is not None}
    assert len(answers) == sum(h.answer is not None for h in sent)  # one scan per answerable message
    target = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    async with running(target, serve_config(tmp_path, publishers=publishers)) as daemon:
        ends = daemon.endpoints
        col = await asyncio.to_thread(_push_and_collect, ends.spectra, ends.results, [h.frames for h in sent],
                                      len(answers))  # fmt: skip
        # still serving: ready, and a spectrum sent now is answered
        after = dataclasses.replace(spectra[0], run="after", scan=1)
        late = await asyncio.to_thread(_push_and_collect, ends.spectra, ends.results,
                                       [encode_spectrum(after), encode_run_end("after", 1)], 1)  # fmt: skip
        metric = daemon.metrics.registry.get_sample_value
        assert metric("rtsearch_ready") == 1
        counted = {code: metric("rtsearch_invalid_total", {"reason": code}) for code in
                   ("frames", "topic", "header", "version", "field", "peaks")}  # fmt: skip
        received = {lvl: metric("rtsearch_spectra_received_total", {"ms_level": str(lvl)}) for lvl in (1, 2)}
    assert [r["scan"] for r in late.results()] == [1]
    outcome = check(sent, col.results(), counted)
    assert not outcome.missing, f"{len(outcome.missing)} answerable messages unanswered, e.g. {outcome.missing[:5]}"
    assert not outcome.twice, f"answered more than once: {outcome.twice[:5]}"
    assert not outcome.unexpected and not outcome.wrong_status, (outcome.unexpected[:5], outcome.wrong_status[:5])
    assert outcome.invalid_counted == outcome.invalid_expected and outcome.ok
    assert outcome.answered == len(answers)
    ms = collections.Counter(h.ms_level for h in sent if h.ms_level)
    assert received == {1: float(ms[1]), 2: float(ms[2] + 1)}  # + the one sent afterwards
