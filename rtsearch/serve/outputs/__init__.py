"""The output seam: what the daemon tells besides its results socket — MQTT, elution events — each an `Output`.

The daemon builds the outputs its configuration asks for (`rtsearch.serve.outputs.kinds`) and fans out to them once:
every answer after it is journaled and published (`Output.on_answers`), every event an output raises
(`OutputContext.event`: an elution apex, say) to every output, every run finished (its file written) to every
output. Adding an output is one `Output` subclass and one line in `rtsearch.serve.outputs.kinds.OUTPUTS`. The
results socket itself is not one of them: it is where the answers' latency is measured and the door's answers go too
(`rtsearch.serve.outputs.publish`); nor are the run files, written from the journal when a run ends
(`rtsearch.serve.runs.finish`).

Hooks are called on the event loop unless said otherwise; `on_answers` and `on_event` come from whichever thread
answered (an engine thread, the results thread, the loop) and must not block: an output that does I/O queues.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rtsearch.config import ServeConfig

if TYPE_CHECKING:
    from rtsearch.serve.intake.chunks import SpectraChunk
    from rtsearch.serve.outputs.publish import Answer, Published
    from rtsearch.serve.runs.finish import Finished


@dataclass
class OutputContext:
    """What an output may use when it starts."""

    cfg: ServeConfig
    backend: str  # the daemon's `rtsearch.scoring.backend` name
    results: str  # the results socket's inner endpoint: what is pushed there is published (`Publisher.inner`)
    record: Callable[..., None]  # the metrics' `record`
    loop: asyncio.AbstractEventLoop
    event: Callable[[str, str, bytes], None]  # (kind, run, JSON body) to every output's `on_event`; any thread


class Output:
    """One output; every hook does nothing unless overridden."""

    name = "output"
    wants_psms = False  # `on_answers` needs the identified answers' result messages (`Published.psms`)
    keeps_ms1 = False  # `on_spectra` needs MS1 scans with their peaks (the intake keeps them)

    async def start(self, ctx: OutputContext) -> None:
        """Connect, start threads or processes; raise `rtsearch.errors.EndpointError` when it cannot."""

    def on_spectra(self, chunk: SpectraChunk) -> None:
        """A chunk of spectra received (MS1 rows with peaks when `keeps_ms1`)."""

    def on_answers(self, answers: Sequence[Answer], published: Published) -> None:
        """Answers journaled and published (any thread; never blocks)."""

    def on_event(self, kind: str, run: str, body: bytes) -> None:
        """An event an output raised (``kind``: ``"elution"``); any thread, never blocks."""

    def on_run_finished(self, done: Finished) -> None:
        """A run finished: its results file written."""

    def check(self) -> str | None:
        """The supervisor's look (every `rtsearch.serve.daemon.SUPERVISE_S`): restart what stopped, or say why the
        output failed (the daemon then stops)."""
        return None

    async def drain(self, timeout_s: float) -> None:
        """At shutdown, after the last answer: send what is queued, within ``timeout_s``."""

    async def aclose(self) -> None:
        """Stop (after `drain`)."""

