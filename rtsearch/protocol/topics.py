"""Every topic name rtsearch speaks, in one place (docs/protocol.md).

ZeroMQ: the first frame of each message. MQTT: ``rtsearch/<instrument>/...`` with each name made one safe topic
level (`rtsearch.serve.outputs.mqtt.topic_segment`).
"""

from __future__ import annotations

# ZeroMQ, to the daemon: one spectrum, a run's start and end, many spectra at once
SPECTRUM, RUN_START, RUN_END, SPECTRA = b"spectrum", b"run.start", b"run.end", b"spectra"
# ZeroMQ, from the daemon: one result, many at once (answering ``spectra``), an elution event
RESULT, BATCH_RESULTS, ELUTION = b"result", b"batch.results", b"elution"

# MQTT, under ``rtsearch/<instrument>``: the daemon's status (retained), and per run its identifications, elution
# events and summary
MQTT_ROOT = "rtsearch"
MQTT_STATUS = "status"
MQTT_PSM, MQTT_ELUTION, MQTT_SUMMARY = "psm", "elution", "summary"
