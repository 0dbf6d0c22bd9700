"""The daemon's tuning knobs: every ``RTSEARCH_*`` environment variable, declared and read here and nowhere else.

These are measured defaults that benchmarks turn (`bench/README.md`), not settings a user needs: each field of
`Tuning` is one knob, its unit in its name, ``None`` meaning "the default beside the code that uses it", where the
measurement behind that default is written. ``RTSEARCH_`` + the field's name in capitals overrides it for a process
and the processes it starts; a value that is not a number in the field's range is ignored with a warning (a typo in a
benchmark's environment must not stop a daemon). A knob users should turn becomes a ``[serve]`` key instead.

`tuning()` reads the environment each call (a dozen lookups, ~2 µs), so a test's ``monkeypatch.setenv`` applies at
once; the parsed values are cached by the raw strings.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)
PREFIX = "RTSEARCH_"


def _knob(doc: str, *, positive: bool = False) -> Any:
    """A field that is unset by default, with what it does and its range (> 0 if ``positive``, else ≥ 0)."""
    return field(default=None, metadata={"doc": doc, "positive": positive})


@dataclass(frozen=True)
class Tuning:
    """Every tuning knob; ``None``: the default of the module named in its description."""

    expiry_slack_ms: float | None = _knob(
        "waking up and answering spectra given up before their deadline (`rtsearch.serve.engine.batching`: 25 ms)"
    )
    warm_up_batch_s: float | None = _knob(
        "a NumPy engine's warm-up leaves out batch sizes slower than this "
        "(`rtsearch.serve.executors.engine_process`: 5 s)",
        positive=True,
    )
    slow_batch_s: float | None = _knob(
        "engine batches slower than this are logged (`rtsearch.serve.engine.workers`: 0.5 s)"
    )
    overlap_min: int | None = _knob(
        "spectra waiting that let engine threads after the first take a batch (`rtsearch.serve.engine.workers`: 1024)"
    )
    gil_switch_s: float | None = _knob(
        "the daemon's GIL switch interval (`rtsearch.serve.children.runtime`: 0.1 ms, 1 ms with engine processes)",
        positive=True,
    )
    intake_flush_ms: float | None = _knob(
        "a chunk of spectra goes at most this long after its first message (`rtsearch.serve.intake.reader`: 1 ms, 2 ms "
        "behind the lanes' front)"
    )
    io_threads: int | None = _knob(
        "ZeroMQ I/O threads of the lanes' front and results fan-in (`rtsearch.serve.lanes`: 2)", positive=True
    )
    cluster_lead_ms: float | None = _knob(
        "a cluster batch is taken this long before its worker is predicted free (`rtsearch.serve.engine.pacing`: 1 ms)"
    )
    cluster_depth: int | None = _knob(
        "a lane's batches in flight a cluster worker (`rtsearch.serve.engine.pacing`: 2, split between lanes sharing "
        "them)",
        positive=True,
    )
    cluster_worth: bool | None = _knob(
        "behind a batch in flight, the next waits to be worth its fixed cost (`rtsearch.serve.engine.pacing`: on)"
    )
    give_up_behind: bool | None = _knob(
        "an engine thread gives up what its batch would answer late behind its worker's "
        "(`rtsearch.serve.engine.pacing`: off)"
    )
    cluster_patience: float | None = _knob(
        "the worth rule waits at most until the first spectrum waiting has spent this share of its budget "
        "(`rtsearch.serve.engine.pacing`: 0.25)"
    )
    parts_per_worker: int | None = _knob(
        "parts each reading process cuts a large spectra file into (`rtsearch.io.batches`: 2)", positive=True
    )


KNOBS = tuple(f for f in dataclasses.fields(Tuning))
NAMES = tuple(PREFIX + f.name.upper() for f in KNOBS)


def tuning() -> Tuning:
    """The knobs as this process's environment sets them."""
    return _parsed(tuple(os.environ.get(n, "") for n in NAMES))


@lru_cache(maxsize=64)
def _parsed(given: tuple[str, ...]) -> Tuning:
    values: dict[str, Any] = {f.name: _value(f, name, text) for f, name, text in zip(KNOBS, NAMES, given, strict=True)}
    return Tuning(**values)


def _value(f: dataclasses.Field[Any], name: str, text: str) -> float | int | bool | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    whole = "int" in str(f.type)
    ok = math.isfinite(value) and (value > 0 if f.metadata["positive"] else value >= 0)
    if ok and whole and not value.is_integer():
        ok = False
    if not ok:
        kind = "whole" if whole else "positive" if f.metadata["positive"] else "non-negative"
        log.warning("%s=%r is not a %s number: ignored", name, text, kind)
        return None
    if "bool" in str(f.type):
        return value > 0
    return int(value) if whole else value
