"""The deployment files hang together: pinned images, a GPU for rtsearch, mounts that exist, known keys."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from rtsearch.config import load_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_compose_pins_images_reserves_a_gpu_and_mounts_what_exists() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"rtsearch", "prometheus", "grafana", "mosquitto"}
    for name, svc in services.items():
        image = svc["image"]
        assert re.fullmatch(r"[\w./-]+:v?\d+(\.\d+)+", image), f"{name}: image tag not pinned: {image}"
    devices = services["rtsearch"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert (DEPLOY / services["rtsearch"]["build"]["context"] / services["rtsearch"]["build"]["dockerfile"]).is_file()
    for svc in services.values():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                assert (DEPLOY / src).exists(), vol
    # Prometheus scrapes the service by its compose name, on the port the daemon's config serves
    prom = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    serve = load_config(DEPLOY / "rtsearch.toml").serve
    assert prom["scrape_configs"][0]["static_configs"][0]["targets"] == [f"rtsearch:{serve.metrics_port}"]
    assert serve.metrics_host == "0.0.0.0" and serve.mqtt == "mosquitto:1883"
    # healthy once ready: the daemon's own /readyz on its metrics port
    check = " ".join(services["rtsearch"]["healthcheck"]["test"])
    assert f"127.0.0.1:{serve.metrics_port}/readyz" in check


def test_dockerfile_and_unit() -> None:
    docker = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM nvidia/cuda:[\d.]+-runtime-", docker, re.M)
    assert "USER rtsearch" in docker and '".[gpu]"' in docker
    # the results volume belongs to the service user; the image is healthy once ready
    assert "chown rtsearch:rtsearch /var/lib/rtsearch/results" in docker and "/readyz" in docker
    unit = (DEPLOY / "systemd/rtsearch.service").read_text()
    assert "ExecStart=/opt/rtsearch/bin/rtsearch serve" in unit and "KillSignal=SIGTERM" in unit
    assert "Type=notify" in unit  # READY=1 once the index is loaded (tests/integration/test_service.py)
    # the stop timeout outlasts the daemon's own shutdown bound (30 s by default)
    assert int(re.search(r"TimeoutStopSec=(\d+)", unit).group(1)) > 30  # type: ignore[union-attr]
