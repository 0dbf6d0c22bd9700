"""Prometheus metrics of the daemon: names with units, help text, explicit buckets.

Each daemon owns a `DaemonMetrics` with its own registry (tests run several
daemons in one process), served over HTTP on the metrics port. The daemon's
parts report plain stats dataclasses (`rtsearch.serve.observe.stats`) and `record`
turns them into metric updates: the one place that knows both.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from rtsearch import __version__
from rtsearch.errors import EndpointError
from rtsearch.protocol.wire import INVALID_CODES
from rtsearch.serve.observe import stats as kinds
from rtsearch.serve.observe.http import Health, MetricsServer
from rtsearch.serve.observe.stats import (
    Answered,
    Elution,
    ExecutorStats,
    Mqtt,
    Queue,
    Ready,
    Received,
    Runs,
    Scored,
    Shed,
    Stat,
    Taken,
)
from rtsearch.types import ResultStatus

LATENCY_BUCKETS = (0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
BATCH_BUCKETS = tuple(float(2**i) for i in range(14))  # 1 … 8192 spectra
ENGINE_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)

SHED_REASONS = ("door", "predicted_late", "expired", "queue_full", "shutdown")  # rtsearch.serve.engine.admission
WORKER_STAGES = ("take", "gather", "score", "lock", "results", "publish", "gc")
MODEL_TERMS = ("fixed", "per_spectrum", "tail_fixed", "tail_per_spectrum",  # rtsearch_engine_model_seconds
               "answering_fixed", "answering_per_spectrum")


class BulkHistogram(Collector):
    """A Prometheus histogram that takes a whole batch of observations in one call.

    `prometheus_client.Histogram.observe` takes a lock and walks the buckets in Python
    for every value; at tens of thousands of spectra a second that is a measurable share
    of the event loop. Here a batch is counted with one `numpy.searchsorted` and one
    `numpy.bincount`. Exposed exactly like a client histogram (``_bucket``, ``_count``,
    ``_sum``; ``le`` is "less than or equal").
    """

    def __init__(self, name: str, documentation: str, buckets: Sequence[float], registry: CollectorRegistry) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = np.asarray(sorted(buckets), dtype=np.float64)
        self._bounds = self.bounds.tolist()  # a lone value's bucket by `bisect`
        self._counts = np.zeros(self.bounds.shape[0] + 1, dtype=np.int64)  # the last one is +Inf
        self._sum = 0.0
        self._lock = threading.Lock()
        registry.register(self)

    def observe(self, value: float) -> None:
        """Count one value (NaN is ignored): a lone spectrum's, without the dozen NumPy calls of a batch (its
        bucket as `observe_many` finds it: the first bound it does not exceed)."""
        if value != value:
            return
        k = bisect.bisect_left(self._bounds, value)
        with self._lock:
            self._counts[k] += 1
            self._sum += value

    def observe_many(self, values: np.ndarray) -> None:
        """Count every value of ``values`` (NaN is ignored)."""
        v = np.asarray(values, dtype=np.float64)
        if v.size == 1:  # a lone spectrum's, the usual call at a few hundred spectra a second
            self.observe(float(v.reshape(-1)[0]))
            return
        v = v[~np.isnan(v)]
        if not v.size:
            return
        counts = np.bincount(np.searchsorted(self.bounds, v, side="left"), minlength=self._counts.shape[0])
        with self._lock:
            self._counts += counts
            self._sum += float(v.sum())

    def collect(self) -> Iterator[HistogramMetricFamily]:
        with self._lock:
            cumulative = np.cumsum(self._counts).tolist()
            total = self._sum
        labels = [*(floatToGoString(b) for b in self.bounds.tolist()), "+Inf"]
        fam = HistogramMetricFamily(self.name, self.documentation)
        fam.add_metric([], list(zip(labels, cumulative, strict=True)), total)
        yield fam


class ExecutorMetrics(Collector):
    """``rtsearch_executor_*{path}``: what the engine threads' executors scored (`ExecutorStats`), summed by path
    (``daemon``, ``engine_process``, ``cluster``), read from ``source`` when scraped."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.source: Callable[[], list[ExecutorStats]] | None = None
        registry.register(self)

    def collect(self) -> Iterator[CounterMetricFamily]:
        by_path: dict[str, list[float]] = {}
        for st in self.source() if self.source is not None else []:
            sums = by_path.setdefault(st.path, [0, 0, 0.0, 0])
            for k, v in enumerate((st.batches, st.spectra, st.busy_s, st.failed)):
                sums[k] += v
        for k, (name, what) in enumerate((("batches", "Batches"), ("spectra", "Spectra"),
                                          ("busy_seconds", "Seconds engine threads waited on"),
                                          ("failures", "Failed batches"))):  # fmt: skip
            fam = CounterMetricFamily(f"rtsearch_executor_{name}", f"{what} the executors scored, by path",
                                      labels=["path"])  # fmt: skip
            for path, sums in by_path.items():
                fam.add_metric([path], sums[k])
            yield fam


class DaemonMetrics:
    """Every metric the daemon exports, registered on one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        ProcessCollector(registry=r)  # process_*: CPU seconds, resident memory, open files, start time
        PlatformCollector(registry=r)  # python_info
        GCCollector(registry=r)  # python_gc_*
        self.health = Health()  # /healthz, /readyz (`rtsearch.serve.observe.http`)
        self.executors = ExecutorMetrics(r)  # its ``source`` set by the daemon
        self.server: MetricsServer | None = None
        self.results_write_failures = Counter(
            "rtsearch_results_write_failures_total", "Results files that could not be written (each try; the run "
            "is kept in its journal and tried again)", registry=r)  # fmt: skip
        self.journal_write_failures = Counter(
            "rtsearch_journal_write_failures_total", "Journal writes that failed (each try; the answers are kept in "
            "memory and written once the results folder takes them)", registry=r)  # fmt: skip
        self.journal_owed = Gauge(
            "rtsearch_journal_backlog_bytes", "Bytes of published answers not in their journal yet (its folder "
            "cannot be written): lost if the daemon stops before it can", registry=r)  # fmt: skip
        self.run_finish_failures = Counter(
            "rtsearch_run_finish_failures_total", "Runs that could not be finished (final FDR or results file "
            "failed, not for the disk): what could be written was, the journal moved aside", registry=r)  # fmt: skip
        self.ready = Gauge("rtsearch_ready", "1 once the search target is loaded and intake is open, else 0",
                           registry=r)
        self.spectra_received = Counter(
            "rtsearch_spectra_received_total", "Valid spectra received, by MS level", ["ms_level"], registry=r
        )
        self.results = Counter("rtsearch_results_total", "Result messages published, by status", ["status"], registry=r)
        self.identifications = Counter(
            "rtsearch_identifications_total", "Target PSMs published with a running q-value <= 0.01", registry=r
        )
        self.latency = BulkHistogram(
            "rtsearch_latency_seconds", "Time from receiving a spectrum to publishing its result",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.arrival_age = BulkHistogram(
            "rtsearch_arrival_age_seconds", "Age of spectra when the intake received them (receipt less the sender's "
            "sent_ns, where that clock is plausible): what the door counts against each budget",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.intake_wait = BulkHistogram(
            "rtsearch_intake_wait_seconds", "Time from the intake's receipt of a spectrum to the daemon's taking it "
            "(held by the intake while the daemon lags, and the pipe)", buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.advised_wait = Gauge("rtsearch_admission_wait_seconds", "The wait a spectrum arriving now was last "
                                  "predicted to have (the door's advice): a spectrum older than its budget less this "
                                  "is shed", registry=r)  # fmt: skip
        self.engine_model = Gauge("rtsearch_engine_model_seconds", "The time model the admission predicts by: "
                                  "a batch of n takes fixed + per_spectrum x n on the engine, then tail_fixed + "
                                  "tail_per_spectrum x n to be answered, of which answering_fixed + "
                                  "answering_per_spectrum x n the results thread's own work (its pace)", ["term"],
                                  registry=r)  # fmt: skip
        # the admission's gauges change at every chunk and batch: their values are kept here and read when scraped
        # (`Gauge.set_function`), not set through each gauge's lock as they change (the since-deleted probe
        # `metrics_cost.py`)
        self._now: dict[str, float] = dict.fromkeys(("waiting", "in_flight", "advised", *MODEL_TERMS), 0.0)
        self.advised_wait.set_function(functools.partial(self._now.__getitem__, "advised"))
        for t in MODEL_TERMS:
            self.engine_model.labels(term=t).set_function(functools.partial(self._now.__getitem__, t))
        self.queue_wait = BulkHistogram(
            "rtsearch_queue_wait_seconds", "Time a spectrum waited in the micro-batcher before scoring",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.batch_size = Histogram(
            "rtsearch_batch_size", "Spectra per engine micro-batch", buckets=BATCH_BUCKETS, registry=r
        )
        self.engine_batch = Histogram(
            "rtsearch_engine_batch_seconds", "Engine time to score one micro-batch (worker thread)",
            buckets=ENGINE_BUCKETS, registry=r,
        )  # fmt: skip
        self.worker_seconds = Counter(
            "rtsearch_worker_seconds_total", "Seconds the engine workers spent, by stage: take (an engine thread "
            "waiting for its next batch: idle, or the batcher holding it back), gather (its spectra gathered), score "
            "(the engine), lock (a scored batch waiting for the results thread), results (running q-values, result "
            "records), publish (encode, send, count), gc (garbage collection)", ["stage"], registry=r,
        )  # fmt: skip
        self._worker_stages = {k: self.worker_seconds.labels(stage=k) for k in WORKER_STAGES}
        self.queue_depth = Gauge("rtsearch_queue_depth", "Spectra waiting in the micro-batcher", registry=r)
        self.queue_depth.set_function(functools.partial(self._now.__getitem__, "waiting"))
        self.in_flight = Gauge("rtsearch_batches_in_flight", "Micro-batches being scored now", registry=r)
        self.in_flight.set_function(functools.partial(self._now.__getitem__, "in_flight"))
        self.deadline_missed = Counter(
            "rtsearch_deadline_missed_total", "Results published after their spectrum's latency budget", registry=r
        )
        self.invalid = Counter(
            "rtsearch_invalid_total", "Malformed messages received, by reason", ["reason"], registry=r
        )
        self.shed = Counter("rtsearch_shed_total", "Spectra answered unscored under overload, by reason", ["reason"],
                            registry=r)  # fmt: skip
        self.mqtt_dropped = Counter(
            "rtsearch_mqtt_dropped_total", "MQTT messages dropped (outbound queue full or broker down)", registry=r
        )
        self.mqtt_connected = Gauge("rtsearch_mqtt_connected", "1 while connected to the MQTT broker", registry=r)
        self.elution_events = Counter("rtsearch_elution_events_total", "Elution events published, by kind (apex, end)",
                                      ["event"], registry=r)  # fmt: skip
        for kind in ("apex", "end"):  # series from the start (0 without --elution)
            self.elution_events.labels(event=kind)
        self.elution_followed = Gauge("rtsearch_elution_followed", "Identified precursors followed through MS1 now",
                                      registry=r)  # fmt: skip
        self.elution_dropped = Counter("rtsearch_elution_dropped_total",
                                       "MS1 scans, precursors or run ends the elution service's full queue dropped",
                                       registry=r)  # fmt: skip
        self.cluster_up = Gauge("rtsearch_cluster_worker_up", "1 while a cluster worker answers (its piece of the "
                                "precursor-mass range: -1 in replicate mode; its process: lanes' own workers of one "
                                "name are told apart by it, a worker the lanes share is one)",
                                ["worker", "piece", "pid"], registry=r)  # fmt: skip
        self.cluster_spectra = Counter("rtsearch_cluster_spectra_total", "Spectra a cluster worker scored",
                                       ["worker"], registry=r)  # fmt: skip
        self.cluster_busy = Counter("rtsearch_cluster_busy_seconds_total", "Seconds a cluster worker spent scoring "
                                    "(its rate over wall time: how busy it is)", ["worker"], registry=r)  # fmt: skip
        self.cluster_rounds = Counter("rtsearch_cluster_rounds_total", "Rounds a cluster worker scored (the batches "
                                      "waiting at it scored as one; spectra over rounds: a round's mean size)",
                                      ["worker"], registry=r)  # fmt: skip
        self.cluster_deaths = Counter("rtsearch_cluster_worker_deaths_total", "Cluster workers called dead (silent "
                                      "5 s, or back as a new process)", registry=r)  # fmt: skip
        self.cluster_resent = Counter("rtsearch_cluster_resent_batches_total",
                                      "Batches sent again to another worker after theirs died", registry=r)
        self.mqtt_configured = Gauge(
            "rtsearch_mqtt_configured", "1 when the daemon publishes to an MQTT broker (--mqtt), else 0", registry=r
        )
        self.index_peptides = Gauge(
            "rtsearch_index_peptides", "Entries of the loaded search target (peptides, spectra, ...), targets and "
            "decoys", registry=r,
        )  # fmt: skip
        self.gpu_memory = Gauge("rtsearch_gpu_memory_used_bytes", "Bytes held by the GPU memory pool", registry=r)
        self.runs_open = Gauge("rtsearch_runs_open", "Runs started and not yet ended", registry=r)
        self.runs_finished = Counter("rtsearch_runs_finished_total", "Runs finalized (results file written)",
                                     registry=r)  # fmt: skip
        self.build_info = Info(
            "rtsearch_build", "Version, backend, device and instrument of this daemon", registry=r
        )
        self.budget = Gauge(
            "rtsearch_latency_budget_seconds", "Default per-spectrum latency budget (a spectrum may carry its own)",
            registry=r,
        )  # fmt: skip
        # per run, while the run is open (its series end when its results file is written)
        run_labels = ["instrument", "run"]
        self._run_series: dict[tuple[str, str], tuple[Any, ...]] = {}  # (instrument, run): its three series
        self.run_results = Counter(
            "rtsearch_run_results_total", "MS2 results published for the run", run_labels, registry=r
        )
        self.run_identifications = Counter(
            "rtsearch_run_identifications_total", "Target PSMs of the run published with running q-value <= 0.01",
            run_labels, registry=r,
        )  # fmt: skip
        self.run_score_threshold = Gauge(
            "rtsearch_run_score_threshold", "Lowest live score the run accepts at running q-value <= 0.01 "
            "(the running FDR threshold; NaN before any PSM passes)", run_labels, registry=r,
        )  # fmt: skip
        # every label value exists from the start, so rates are 0 rather than absent
        for s in ResultStatus:
            self.results.labels(status=s.value)
        for code in INVALID_CODES:
            self.invalid.labels(reason=code)
        for reason in SHED_REASONS:
            self.shed.labels(reason=reason)
        self._results = {s.value: self.results.labels(status=s.value) for s in ResultStatus}
        self._received: dict[int, Any] = {}
        for level in (1, 2):
            self.received(level)
        self.instrument = "instrument"

    def record(self, *stats: Stat) -> None:
        """Apply what the daemon's parts report (`rtsearch.serve.observe.stats`)."""
        for st in stats:
            match st:
                case Answered():
                    self.latency.observe_many(st.latency_s)
                    if st.missed:
                        self.deadline_missed.inc(st.missed)
                    for status, count in st.by_status.items():
                        self._results[status].inc(count)
                    if st.by_status.get(ResultStatus.IDENTIFIED.value):
                        self.identifications.inc(st.by_status[ResultStatus.IDENTIFIED.value])
                    for run in st.runs:
                        self.run_answered(self.instrument, run.run, run.results, run.identified, run.threshold)
                case Received():
                    if st.arrival is not None:
                        self.arrival_age.observe_many(st.arrival[0])
                        self.intake_wait.observe_many(st.arrival[1])
                    for level, count in st.spectra.items():
                        self.received(level).inc(count)
                    for code, count in st.invalid.items():
                        self.invalid.labels(reason=code).inc(count)
                case Queue():  # read when scraped (`__init__`)
                    now = self._now
                    now["waiting"], now["in_flight"] = st.waiting, st.in_flight
                    if st.advised_wait_s is not None:
                        now["advised"] = st.advised_wait_s
                    if st.model_s is not None:
                        now.update(zip(MODEL_TERMS, st.model_s, strict=True))
                case Taken():
                    self.queue_wait.observe_many(st.waited_s)
                    self.batch_size.observe(st.size)
                    self.worker_time(take=st.idle_s, gather=st.gather_s)
                case Scored():
                    self.engine_batch.observe(st.engine_s)
                    self.worker_time(**st.stages)
                case Shed():
                    self.shed.labels(reason=st.reason).inc(st.count)
                case Runs():
                    self.runs_open.set(st.open)
                    if st.finished is not None:
                        self.runs_finished.inc()
                        if not st.still_open:
                            self.run_closed(self.instrument, st.finished)
                case Mqtt():
                    if st.connected is not None:
                        self.mqtt_connected.set(st.connected)
                    if st.dropped:
                        self.mqtt_dropped.inc(st.dropped)
                case kinds.ResultsWrite():
                    self.results_write_failures.inc(st.failed)
                case kinds.JournalWrite():
                    self.journal_write_failures.inc(st.failed)
                    if st.owed_bytes is not None:
                        self.journal_owed.set(st.owed_bytes)
                case kinds.RunFinishFailed():
                    self.run_finish_failures.inc(st.failed)
                case Ready():
                    self.ready.set(int(st.ready))
                    self.health.set(ready=st.ready, state=None if st.ready else "shutting down")
                case kinds.Cluster():
                    self.cluster_up.labels(worker=st.worker, piece=str(st.piece), pid=str(st.pid)).set(int(st.up))
                    if st.spectra:
                        self.cluster_spectra.labels(worker=st.worker).inc(st.spectra)
                        self.cluster_busy.labels(worker=st.worker).inc(st.busy_s)
                        self.cluster_rounds.labels(worker=st.worker).inc(st.rounds)
                    if st.died:
                        self.cluster_deaths.inc()
                    if st.resent:
                        self.cluster_resent.inc(st.resent)
                case Elution():
                    for kind, count in st.events.items():
                        self.elution_events.labels(event=kind).inc(count)
                    if st.followed is not None:
                        self.elution_followed.set(st.followed)
                    if st.dropped:
                        self.elution_dropped.inc(st.dropped)

    def received(self, ms_level: int) -> Any:
        """The received counter of ``ms_level`` (children cached: this runs once per message)."""
        child = self._received.get(ms_level)
        if child is None:
            child = self._received[ms_level] = self.spectra_received.labels(ms_level=str(ms_level))
        return child

    def worker_time(self, **seconds: float) -> None:
        """Add one batch's seconds per worker stage (`WORKER_STAGES`)."""
        for stage, value in seconds.items():
            self._worker_stages[stage].inc(value)

    def run_answered(self, instrument: str, run: str, results: int, identified: int, threshold: float) -> None:
        """Count a run's published results and set its running FDR threshold."""
        series = self._run_series.get((instrument, run))
        if series is None:  # a labelled child looked up once a run (`labels()`: 4 µs a call, three a run a batch)
            series = self._run_series[instrument, run] = tuple(
                m.labels(instrument=instrument, run=run)
                for m in (self.run_results, self.run_identifications, self.run_score_threshold)
            )
        series[0].inc(results)
        series[1].inc(identified)
        series[2].set(threshold)

    def run_closed(self, instrument: str, run: str) -> None:
        """End a finished run's series (a daemon serving for months must not keep every run's)."""
        self._run_series.pop((instrument, run), None)
        for m in (self.run_results, self.run_identifications, self.run_score_threshold):
            with contextlib.suppress(KeyError):
                m.remove(instrument, run)

    def describe(
        self, *, backend: str, device: str, instrument: str, budget_s: float, mqtt: bool, peptides: int,
        gpu_bytes: Callable[[], float], searching: str,
    ) -> None:  # fmt: skip
        """What this daemon is; ``searching`` names its target's kind (`SearchTarget.kind`)."""
        self.instrument = instrument
        self.mqtt_configured.set(int(mqtt))
        self.build_info.info({"version": __version__, "backend": backend, "device": device, "instrument": instrument,
                              "searching": searching})  # fmt: skip
        self.budget.set(budget_s)
        self.index_peptides.set(peptides)
        self.gpu_memory.set_function(gpu_bytes)

    def serve(self, port: int, addr: str = "127.0.0.1", bound: socket.socket | None = None) -> MetricsServer:
        """Start the HTTP endpoints (`rtsearch.serve.observe.http`; ``port`` 0: a free one; ``bound``: on that socket, a
        lane's); `EndpointError` when the address cannot be bound."""
        try:
            self.server = MetricsServer(self.registry, self.health, port=port, host=addr, bound=bound)
        except OSError as e:
            raise EndpointError(f"metrics port {addr}:{port}: {e.strerror or e}; choose another with --metrics-port "
                                "(0: any free port)") from None  # fmt: skip
        return self.server
