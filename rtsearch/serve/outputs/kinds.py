"""Every kind of `rtsearch.serve.outputs.Output` the daemon can build, and which the configuration asks for."""

from __future__ import annotations

from collections.abc import Callable

from rtsearch.config import ServeConfig
from rtsearch.serve.outputs import Output
from rtsearch.serve.outputs.elution import ElutionOutput
from rtsearch.serve.outputs.mqtt import MqttOutput

# each kind: a function of the [serve] configuration giving the output, or None when it is not asked for
OUTPUTS: tuple[Callable[[ServeConfig], Output | None], ...] = (
    lambda cfg: MqttOutput() if cfg.mqtt else None,
    lambda cfg: ElutionOutput() if cfg.elution else None,
)


def outputs_for(cfg: ServeConfig) -> list[Output]:
    """The outputs ``cfg`` asks for, in `OUTPUTS` order."""
    return [out for make in OUTPUTS if (out := make(cfg)) is not None]
