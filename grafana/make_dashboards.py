"""Write the Grafana dashboards (``grafana/dashboards/*.json``) from the panel list below.

    python grafana/make_dashboards.py          # rewrite the JSON files
    python grafana/make_dashboards.py --check  # exit 1 if they differ from what this writes

Grafana >= 10 JSON model, no saved ids or paths: the datasource, instrument, instance and (on
the Runs dashboard) run are template variables. Every expression names only metrics the
daemon exports (``tests/integration/test_monitoring.py`` checks that against a real
Prometheus scraping a real daemon).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
LIVE = 'instance=~"$instance"'
RUN = 'instance=~"$instance", instrument=~"$instrument", run=~"$run"'
RATE = "$__rate_interval"


def q(expr: str, legend: str) -> dict[str, Any]:
    return {"expr": expr, "legendFormat": legend}


def quantiles(metric: str, sel: str, qs: tuple[float, ...] = (0.5, 0.9, 0.99)) -> list[dict[str, Any]]:
    return [
        q(f"histogram_quantile({x}, sum by (le) (rate({metric}_bucket{{{sel}}}[{RATE}])))", f"p{round(x * 100)}")
        for x in qs
    ]


# (title, unit, description, targets); panels are laid out two per row in this order
def _by_pid(series: str) -> str:
    """A cluster worker's ``series`` (one a lane behind lanes) with its process (``pid``) joined from
    ``rtsearch_cluster_worker_up``: summed by worker and pid, lanes' own workers of one name stay apart and a worker
    the lanes share is their sum (each lane counts its own part of it)."""
    return (f"{series} * on (instance, lane, worker) group_left (pid) "
            f"max by (instance, lane, worker, pid) (rtsearch_cluster_worker_up{{{LIVE}}} == 1)")  # fmt: skip


LIVE_PANELS: list[tuple[str, str, str, list[dict[str, Any]]]] = [
    ("Spectra received /s", "reqps", "Valid spectra arriving on the spectra socket, by MS level.",
     [q(f"sum by (ms_level) (rate(rtsearch_spectra_received_total{{{LIVE}}}[{RATE}]))", "MS{{ms_level}}")]),
    ("Results /s by status", "reqps", "Result messages published: identified, unidentified, shed, invalid.",
     [q(f"sum by (status) (rate(rtsearch_results_total{{{LIVE}}}[{RATE}]))", "{{status}}")]),
    ("Identifications /s and running ID rate", "reqps",
     "Target PSMs published with running q <= 0.01 per second (left) and as a share of scored spectra (right).",
     [q(f"sum(rate(rtsearch_identifications_total{{{LIVE}}}[{RATE}]))", "identified /s"),
      q(f"sum(rate(rtsearch_identifications_total{{{LIVE}}}[{RATE}])) / "
        f"sum(rate(rtsearch_results_total{{{LIVE}, status=~\"identified|unidentified\"}}[{RATE}]))", "ID rate")]),
    ("Latency receive -> publish vs budget", "s",
     "Quantiles of the daemon's latency histogram; 'max' is the upper bound of the highest non-empty bucket.",
     [*quantiles("rtsearch_latency_seconds", LIVE),
      q(f"histogram_quantile(1, sum by (le) (rate(rtsearch_latency_seconds_bucket{{{LIVE}}}[{RATE}])))", "max"),
      q(f"max(rtsearch_latency_budget_seconds{{{LIVE}}})", "budget")]),
    ("Deadline misses /s", "reqps", "Results published after their spectrum's latency budget.",
     [q(f"sum(rate(rtsearch_deadline_missed_total{{{LIVE}}}[{RATE}]))", "missed /s")]),
    ("Queue depth and batches in flight", "short", "Spectra waiting in the micro-batcher; batches being scored.",
     [q(f"sum(rtsearch_queue_depth{{{LIVE}}})", "waiting"),
      q(f"sum(rtsearch_batches_in_flight{{{LIVE}}})", "in flight")]),
    ("Queue wait", "s", "Time spectra waited in the micro-batcher before scoring.",
     quantiles("rtsearch_queue_wait_seconds", LIVE, (0.5, 0.99))),
    ("Why spectra are shed: age on arrival and the predicted wait", "s",
     "A spectrum whose age on arrival plus the predicted wait exceeds its budget is answered shed at the door: "
     "ages on arrival rising point at the senders, the intake's wait (receipt to the daemon) at a daemon behind its "
     "intake, the predicted wait at the engine (and its model's fixed cost a batch, on the engine and answering it).",
     [*(q(f"histogram_quantile({x}, sum by (le) (rate(rtsearch_{m}_seconds_bucket{{{LIVE}}}[{RATE}])))", f"{name} p{p}")
        for m, name, x, p in (("arrival_age", "age on arrival", 0.5, 50), ("arrival_age", "age on arrival", 0.99, 99),
                              ("intake_wait", "intake's wait", 0.99, 99))),
      q(f"max(rtsearch_admission_wait_seconds{{{LIVE}}})", "predicted wait"),
      q(f"max(rtsearch_engine_model_seconds{{{LIVE}, term=\"fixed\"}})", "model: engine's fixed a batch"),
      q(f"max(rtsearch_engine_model_seconds{{{LIVE}, term=\"tail_fixed\"}})", "model: answering's fixed a batch")]),
    ("Batch size", "short", "Spectra per engine micro-batch (quantiles and mean).",
     [*quantiles("rtsearch_batch_size", LIVE, (0.5, 0.99)),
      q(f"sum(rate(rtsearch_batch_size_sum{{{LIVE}}}[{RATE}])) / "
        f"sum(rate(rtsearch_batch_size_count{{{LIVE}}}[{RATE}]))", "mean")]),
    ("Engine batch time", "s", "Engine time to score one micro-batch (worker thread).",
     quantiles("rtsearch_engine_batch_seconds", LIVE)),
    ("Engine worker time by stage", "percentunit",
     "Share of the time per stage: take (an engine thread waiting for its next batch), gather (its spectra "
     "gathered), score (the engine threads), results (running q-values, result records), publish (encode, send) "
     "and gc (the results thread), lock (a scored batch waiting for the results thread); score near 100 %: the "
     "engine is saturated; results + publish + gc near 100 %: the results thread is; take high while spectra are "
     "shed: the admission holds the engine back.",
     [q(f"sum by (stage) (rate(rtsearch_worker_seconds_total{{{LIVE}}}[{RATE}]))", "{{stage}}")]),
    ("Shed /s by reason", "reqps", "Spectra answered unscored under overload or at shutdown.",
     [q(f"sum by (reason) (rate(rtsearch_shed_total{{{LIVE}}}[{RATE}]))", "{{reason}}")]),
    ("Invalid messages /s by reason", "reqps", "Malformed messages received, by reason.",
     [q(f"sum by (reason) (rate(rtsearch_invalid_total{{{LIVE}}}[{RATE}]))", "{{reason}}")]),
    ("MQTT: drops /s and connection", "short",
     "Messages dropped by the bounded MQTT queue; 1 while connected (configured: 1 when --mqtt was given).",
     [q(f"sum(rate(rtsearch_mqtt_dropped_total{{{LIVE}}}[{RATE}]))", "dropped /s"),
      q(f"max(rtsearch_mqtt_connected{{{LIVE}}})", "connected"),
      q(f"max(rtsearch_mqtt_configured{{{LIVE}}})", "configured")]),
    ("Elution events /s and precursors followed", "short",
     "With --elution: apex and end events published per second (left), precursors followed through MS1 now, and "
     "items the elution service's full queue dropped per second.",
     [q(f"sum by (event) (rate(rtsearch_elution_events_total{{{LIVE}}}[{RATE}]))", "{{event}} /s"),
      q(f"sum(rtsearch_elution_followed{{{LIVE}}})", "followed"),
      q(f"sum(rate(rtsearch_elution_dropped_total{{{LIVE}}}[{RATE}]))", "dropped /s")]),
    ("Cluster workers: up, spectra /s, deaths", "short",
     "With --cluster: 1 while each worker answers (by worker and its piece of the precursor-mass range; -1: "
     "replicate), the spectra each scores per second, workers called dead per second and batches sent again "
     "(a daemon without a cluster: 0).",
     [q(f"max by (worker, piece) (rtsearch_cluster_worker_up{{{LIVE}}}) or vector(0)", "up {{worker}} piece {{piece}}"),
      q(f"sum by (worker) (rate(rtsearch_cluster_spectra_total{{{LIVE}}}[{RATE}])) or vector(0)",
        "{{worker}} spectra /s"),
      q(f"sum(rate(rtsearch_cluster_worker_deaths_total{{{LIVE}}}[{RATE}]))", "deaths /s"),
      q(f"sum(rate(rtsearch_cluster_resent_batches_total{{{LIVE}}}[{RATE}]))", "resent batches /s")]),
    ("Cluster workers: share of time scoring", "percentunit",
     "With --cluster: the share of wall time each worker spends scoring (its device kept busy); one well below the "
     "others in partition mode: its piece of the mass range is too light (a daemon without a cluster: 0).",
     [q(f"sum by (worker, pid) ({_by_pid('rate(rtsearch_cluster_busy_seconds_total{' + LIVE + '}[' + RATE + '])')})"
        " or vector(0)", "{{worker}} (pid {{pid}}) busy")]),
    ("Cluster workers: spectra a round", "short",
     "With --cluster: the spectra each worker scores in one round (the batches waiting at it, from every lane, scored "
     "as one); small rounds pay a round's fixed cost more often (a daemon without a cluster: 0).",
     [q(f"(sum by (worker, pid) ({_by_pid('rate(rtsearch_cluster_spectra_total{' + LIVE + '}[' + RATE + '])')}) / "
        f"sum by (worker, pid) ({_by_pid('rate(rtsearch_cluster_rounds_total{' + LIVE + '}[' + RATE + '])')}))"
        " or vector(0)", "{{worker}} (pid {{pid}}) spectra a round")]),
    ("GPU memory", "bytes", "Bytes held by the GPU memory pool (0 on the NumPy backend).",
     [q(f"sum by (instance) (rtsearch_gpu_memory_used_bytes{{{LIVE}}})", "{{instance}}")]),
    ("Ready and index", "short", "1 once the index is loaded and intake is open; peptides in the index.",
     [q(f"max by (instance) (rtsearch_ready{{{LIVE}}})", "ready {{instance}}"),
      q(f"max by (instance) (rtsearch_index_peptides{{{LIVE}}})", "peptides {{instance}}")]),
]

RUN_PANELS: list[tuple[str, str, str, list[dict[str, Any]]]] = [
    ("Identifications per run", "short", "Target PSMs published with running q <= 0.01, cumulative, per run.",
     [q(f"sum by (run) (rtsearch_run_identifications_total{{{RUN}}})", "{{run}}")]),
    ("Running identification rate per run", "percentunit", "Identified share of the run's published results.",
     [q(f"sum by (run) (rate(rtsearch_run_identifications_total{{{RUN}}}[{RATE}])) / "
        f"sum by (run) (rate(rtsearch_run_results_total{{{RUN}}}[{RATE}]))", "{{run}}")]),
    ("Running FDR threshold per run", "short",
     "Lowest live score accepted at running q <= 0.01 (jumps when the run's discriminant is refitted).",
     [q(f"max by (run) (rtsearch_run_score_threshold{{{RUN}}})", "{{run}}")]),
    ("Results per run", "short", "MS2 results published for the run, cumulative.",
     [q(f"sum by (run) (rtsearch_run_results_total{{{RUN}}})", "{{run}}")]),
    ("Runs open and finished", "short", "Runs started and not ended; runs finalized in the last hour.",
     [q(f"sum(rtsearch_runs_open{{{LIVE}}})", "open"),
      q(f"sum(increase(rtsearch_runs_finished_total{{{LIVE}}}[1h]))", "finished (1 h)")]),
]


def variable(name: str, query: str, label: str) -> dict[str, Any]:
    return {
        "name": name, "label": label, "type": "query", "datasource": DS, "refresh": 2, "includeAll": True,
        "multi": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"},
        "definition": query, "query": {"query": query, "refId": f"{name}-query"}, "sort": 1,
    }  # fmt: skip


def dashboard(uid: str, title: str, panels: list[tuple[str, str, str, list[dict[str, Any]]]], runs: bool) -> dict:
    variables: list[dict[str, Any]] = [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1},
        variable("instrument", "label_values(rtsearch_build_info, instrument)", "Instrument"),
        variable("instance", 'label_values(rtsearch_build_info{instrument=~"$instrument"}, instance)', "Instance"),
    ]  # fmt: skip
    if runs:
        variable_run = variable(
            "run", 'label_values(rtsearch_run_results_total{instance=~"$instance", instrument=~"$instrument"}, run)',
            "Run",
        )  # fmt: skip
        variables.append(variable_run)
    out = []
    for i, (ptitle, unit, desc, targets) in enumerate(panels):
        out.append({
            "id": i + 1, "type": "timeseries", "title": ptitle, "description": desc, "datasource": DS,
            "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
            "targets": [{**t, "refId": chr(ord("A") + k), "datasource": DS} for k, t in enumerate(targets)],
        })  # fmt: skip
    return {
        "uid": uid, "title": title, "tags": ["rtsearch"], "timezone": "browser", "schemaVersion": 39,
        "editable": True, "refresh": "5s", "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": variables}, "panels": out, "annotations": {"list": []},
    }  # fmt: skip


def render() -> dict[str, str]:
    return {
        "live-acquisition.json": json.dumps(dashboard("rtsearch-live", "rtsearch: Live acquisition", LIVE_PANELS,
                                                      False), indent=2) + "\n",
        "runs.json": json.dumps(dashboard("rtsearch-runs", "rtsearch: Runs", RUN_PANELS, True), indent=2) + "\n",
    }


def main() -> int:
    stale = []
    for name, text in render().items():
        path = HERE / "dashboards" / name
        if "--check" in sys.argv:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print("out of date (run python grafana/make_dashboards.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
