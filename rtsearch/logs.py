"""How rtsearch logs: plain lines for a person, or one JSON object a line for a log shipper
(``--log-format json``: journald, Loki, Elasticsearch read it without a parsing rule). The formatter is a
dozen lines of the standard library's `logging`, not python-json-logger: no dependency for four fields."""

from __future__ import annotations

import json
import logging
import time
from typing import Literal

LogFormat = Literal["text", "json"]
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """``{"time": ISO 8601 UTC, "level", "logger", "message"[, "error"]}``, one line a record."""

    converter = time.gmtime  # type: ignore[assignment]  # UTC, as the "Z" says (typeshed: gmtime has overloads)

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure(level: int, fmt: LogFormat) -> None:
    """The root logger at ``level``, to stderr, as ``fmt`` says."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT))
    logging.basicConfig(level=level, handlers=[handler])
