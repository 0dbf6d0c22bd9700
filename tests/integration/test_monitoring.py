"""Dashboards and alert rules against the daemon's real metrics, in a real Prometheus.

A Prometheus server (Debian package ``prometheus``; ``.ci/run`` installs it when missing) is
started on a free loopback port, scraping a daemon while the simulator replays a dev run; every
PromQL expression of every Grafana panel, every template variable and every operand of every
alert rule is then evaluated through Prometheus's HTTP API, and each must return data without
error. ``promtool`` checks the shipped config and rules, and lints the daemon's /metrics.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from rtsearch.cli.demo import TOML, bundled
from rtsearch.config import load_config
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.serve.observe.metrics import DaemonMetrics
from rtsearch_sim.collector import Collector
from rtsearch_sim.replay import Sender, Sent, load_run, replay
from tests.streaming import free_port, running, serve_config

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "grafana/dashboards").glob("*.json"))
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
CONFIG = ROOT / "deploy/prometheus/prometheus.yml"
VARIABLES = {"$__rate_interval": "10s", "$instance": ".*", "$instrument": ".*", "$run": ".*"}
METRIC = re.compile(r"\b(rtsearch_[a-z0-9_]+|up)\b(?!\s*\()")  # a name, not a function call


def _tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    assert path, f"{name} not found: install the Debian package 'prometheus' (.ci/run does)"
    return path


def _panel_exprs() -> list[tuple[str, str]]:
    out = []
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            out += [(f"{path.name}: {panel['title']}", t["expr"]) for t in panel["targets"]]
    return out


def _variable_queries() -> list[tuple[str, str, str]]:
    """(where, metric selector, label) of every ``label_values(selector, label)`` variable."""
    out = []
    for path in DASHBOARDS:
        for var in json.loads(path.read_text())["templating"]["list"]:
            if var["type"] == "query":
                m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", var["definition"])
                assert m, var["definition"]
                out.append((f"{path.name}: ${var['name']}", m.group(1), m.group(2)))
    return out


def _rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


def _operands(expr: str) -> list[str]:
    """The sides of the top-level comparisons and set operations of an alert expression."""
    parts, depth, start = [], 0, 0
    tokens = re.finditer(r"[()]|\s(?:==|!=|>=|<=|>|<|and|or|unless)\s", expr)
    for t in tokens:
        if t.group() == "(":
            depth += 1
        elif t.group() == ")":
            depth -= 1
        elif depth == 0:
            parts.append(expr[start : t.start()])
            start = t.end()
    parts.append(expr[start:])
    modifier = r"^\s*(?:bool\s+)?(?:(?:on|ignoring)\s*\([^)]*\)\s*)?(?:group_(?:left|right)(?:\s*\([^)]*\))?\s*)?"
    return [re.sub(modifier, "", p).strip() for p in parts]


def _exported_names() -> set[str]:
    m = DaemonMetrics()
    m.describe(backend="numpy", device="cpu", instrument="x", budget_s=0.05, mqtt=False, peptides=1,
               gpu_bytes=lambda: 0.0, searching="index")  # fmt: skip
    text = generate_latest(m.registry).decode()
    names = {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if line and line[0] != "#"}
    # labelled families with no child yet (the per-run ones before a run) have no sample lines
    suffixes = {"histogram": ("_bucket", "_sum", "_count"), "counter": ("_total",), "info": ("_info",), "gauge": ("",)}
    for fam in m.registry.collect():
        names |= {fam.name + s for s in suffixes[fam.type]}
    return names


def _names(expr: str) -> set[str]:
    return set(METRIC.findall(expr))


def test_dashboards_are_generated_and_name_only_exported_metrics() -> None:
    gen = subprocess.run([sys.executable, str(ROOT / "grafana/make_dashboards.py"), "--check"], capture_output=True,
                         text=True)  # fmt: skip
    assert gen.returncode == 0, gen.stdout + gen.stderr
    exported = _exported_names() | {"up"}
    assert {"rtsearch_latency_seconds_bucket", "rtsearch_run_score_threshold", "rtsearch_build_info"} <= exported
    assert len(DASHBOARDS) == 2
    exprs = [e for _, e in _panel_exprs()] + [sel for _, sel, _ in _variable_queries()] + [r["expr"] for r in _rules()]
    assert len(exprs) > 40
    named = set().union(*(_names(e) for e in exprs))
    assert named - exported == set(), f"not exported by the daemon: {sorted(named - exported)}"
    # and the panels use what the issue lists (a dashboard that lost a panel fails here)
    for wanted in ("rtsearch_spectra_received_total", "rtsearch_results_total", "rtsearch_identifications_total",
                   "rtsearch_latency_seconds_bucket", "rtsearch_latency_budget_seconds",
                   "rtsearch_deadline_missed_total", "rtsearch_queue_depth", "rtsearch_batch_size_bucket",
                   "rtsearch_engine_batch_seconds_bucket", "rtsearch_shed_total", "rtsearch_invalid_total",
                   "rtsearch_mqtt_dropped_total", "rtsearch_mqtt_connected", "rtsearch_gpu_memory_used_bytes",
                   "rtsearch_run_identifications_total", "rtsearch_run_score_threshold"):  # fmt: skip
        assert wanted in named, wanted
    assert {r["alert"] for r in _rules()} >= {"RtsearchLatencyOverBudget", "RtsearchShedding",
                                              "RtsearchDeadlineMisses", "RtsearchDown", "RtsearchMqttDisconnected",
                                              "RtsearchJournalNotWritten", "RtsearchRunNotFinished"}


def test_operands_split_golden() -> None:
    assert _operands("rtsearch_mqtt_connected == 0 and on (instance) rtsearch_mqtt_configured == 1") == [
        "rtsearch_mqtt_connected", "0", "rtsearch_mqtt_configured", "1"]  # fmt: skip
    assert _operands("sum by (i) (rate(a[5m])) / sum by (i) (rate(b[5m])) > 0.01") == [
        "sum by (i) (rate(a[5m])) / sum by (i) (rate(b[5m]))", "0.01"]  # fmt: skip


def test_promtool_checks_config_and_rules() -> None:
    """Config and rules valid; the rules' unit tests (deploy/prometheus/alerts_test.yml: a results file that failed
    to write fires RtsearchResultsNotWritten, journal writes that failed RtsearchJournalNotWritten, a run not finished
    RtsearchRunNotFinished, and each clears) pass."""
    promtool = _tool("promtool")
    for args in (["check", "config", str(CONFIG)], ["check", "rules", str(ALERTS)],
                 ["test", "rules", str(ALERTS.with_name("alerts_test.yml"))]):  # fmt: skip
        res = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def _get(port: int, path: str, **params: str) -> Any:
    url = f"http://127.0.0.1:{port}{path}?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _start_prometheus(tmp: Path, metrics_port: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    cfg = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "rtsearch", "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.Popen(
        [_tool("prometheus"), f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=(tmp / "prometheus.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1)
            return proc, port
        except OSError:
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("prometheus did not become ready:\n" + (tmp / "prometheus.log").read_text()[-2000:])


def _replay(spectra_ep: str, results_ep: str, run: list[Any]) -> tuple[Sent, Collector, float]:
    col = Collector(results_ep).start()
    sent = Sent()
    try:
        with Sender(spectra_ep, mode="push", wait_s=20) as sender:
            t0 = time.time()
            replay(sender, [("ecoli", run)], speed=None, rate=20.0, sent=sent)  # ~8 s: many scrapes mid-run
        col.wait(len(sent.ms2), idle_s=20, timeout_s=120)
    finally:
        col.stop()
    return sent, col, t0


@pytest.mark.asyncio
async def test_prometheus_evaluates_every_panel_variable_and_alert(demo_index, data, tmp_path) -> None:
    engine = DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))
    run = load_run(data / "ecoli-small/Ecoli_MS2_small.mzML")
    cfg = serve_config(tmp_path, instrument="orbitrap-test")
    async with running(engine, cfg) as daemon:
        prom, port = _start_prometheus(tmp_path, daemon.endpoints.metrics_port)
        try:
            metrics_text = urllib.request.urlopen(
                f"http://127.0.0.1:{daemon.endpoints.metrics_port}/metrics", timeout=5
            ).read()
            for _ in range(300):  # Prometheus starts scraping a few seconds after it is ready
                body = _get(port, "/api/v1/query", query="count_over_time(up[1m])")["data"]["result"]
                if body and int(body[0]["value"][1]) >= 2:
                    break
                await asyncio.sleep(0.1)
            sent, col, t0 = await asyncio.to_thread(_replay, daemon.endpoints.spectra, daemon.endpoints.results, run)
            assert col.report(sent.ms2).lost == 0
            at = str(t0 + 6.0)  # mid-run: the run's series are live, rates have several samples
            await asyncio.sleep(2.0)  # the samples up to `at` are scraped
            failures: list[str] = []

            def check(where: str, expr: str) -> None:
                for k, v in VARIABLES.items():
                    expr = expr.replace(k, v)
                try:
                    body = _get(port, "/api/v1/query", query=expr, time=at)
                except OSError as e:
                    failures.append(f"{where}: {expr}: {e}")
                    return
                if body.get("status") != "success":
                    failures.append(f"{where}: {expr}: {body.get('error')}")
                elif not body["data"]["result"]:
                    failures.append(f"{where}: {expr}: no data")

            for where, expr in _panel_exprs():
                check(where, expr)
            for rule in _rules():
                check(f"alert {rule['alert']} (whole)", rule["expr"])  # must evaluate; empty = not firing
                if failures and failures[-1].endswith("no data"):
                    failures.pop()
                for operand in _operands(rule["expr"]):
                    check(f"alert {rule['alert']}", operand)
            for where, selector, label in _variable_queries():
                sel = selector
                for k, v in VARIABLES.items():
                    sel = sel.replace(k, v)
                values = _get(port, f"/api/v1/label/{label}/values", **{"match[]": sel})["data"]
                if not values:
                    failures.append(f"{where}: label_values({sel}, {label}): no values")
                elif label == "instrument" and values != ["orbitrap-test"]:
                    failures.append(f"{where}: instrument values {values}")
            assert not failures, "\n".join(failures)
            rules = _get(port, "/api/v1/rules")["data"]["groups"][0]["rules"]
            assert len(rules) == len(_rules()) and all(r["health"] == "ok" for r in rules), rules
        finally:
            prom.terminate()
            prom.wait(10)
    lint = subprocess.run([_tool("promtool"), "check", "metrics"], input=metrics_text, capture_output=True,
                          timeout=60)  # fmt: skip
    assert lint.returncode == 0, (lint.stdout + lint.stderr).decode()


def test_not_ready_fires_only_after_the_start_the_deploy_files_allow() -> None:
    """A daemon loading a large index is not an incident: `RtsearchNotReady` waits at least as long as the systemd
    unit (TimeoutStartSec) and the container healthcheck (start period) let it start."""
    (rule,) = [r for r in _rules() if r.get("alert") == "RtsearchNotReady"]
    units = {"s": 1, "m": 60, "h": 3600}
    waits_s = int(rule["for"][:-1]) * units[rule["for"][-1]]
    unit = (ROOT / "deploy/systemd/rtsearch.service").read_text()
    start_s = int(re.search(r"^TimeoutStartSec=(\d+)$", unit, re.M).group(1))
    compose = yaml.safe_load((ROOT / "deploy/docker-compose.yml").read_text())
    periods = [int(s["healthcheck"]["start_period"].rstrip("s")) for s in compose["services"].values()
               if "healthcheck" in s]  # fmt: skip
    assert periods and waits_s >= max(start_s, *periods), (rule["for"], start_s, periods)
