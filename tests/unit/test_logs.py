"""``--log-format json``: one JSON object a line, what a log shipper reads without a parsing rule."""

from __future__ import annotations

import io
import json
import logging
import re

from rtsearch.logs import JsonFormatter


def test_each_record_is_one_json_line_with_time_level_logger_message() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("rtsearch.test.json")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("run %r: %d spectra\nsecond line", "a\tb", 3)
        try:
            raise ValueError("bad")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # newlines inside a message or a traceback stay inside its JSON string
    first, second = (json.loads(x) for x in lines)
    assert first["message"] == "run 'a\\tb': 3 spectra\nsecond line" and first["level"] == "warning"
    assert first["logger"] == "rtsearch.test.json"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert second["level"] == "error" and "ValueError: bad" in second["error"]
