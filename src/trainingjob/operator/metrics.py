"""Operator metrics (Prometheus naming: _total counters, _seconds histograms, base units).

Counters and histograms move on transitions the leader writes (so a restart of the operator never counts a job
twice), the webhooks' on the replica that answered; gauges are computed from the operator's caches at scrape time,
never by listing the cluster, and per-job series disappear with the job because they are derived from the cache,
not stored.
"""

from __future__ import annotations

import math
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from trainingjob.api.readouts import phase_shown
from trainingjob.api.status import JobStatus, Phase
from trainingjob.api.times import parse_time
from trainingjob.kube.phases import PodPhase

DURATION_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, 259200)
STARTUP_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
# A webhook answer is pure work on one object (conversion) or a few cached lookups (admission): milliseconds.
WEBHOOK_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
LOOP_LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["namespace", "framework"]
        self.created = Counter(
            "trainingjob_jobs_created_total", "TrainingJobs seen for the first time.", labels, registry=self.registry
        )
        self.succeeded = Counter(
            "trainingjob_jobs_succeeded_total", "TrainingJobs that succeeded.", labels, registry=self.registry
        )
        self.failed = Counter(
            "trainingjob_jobs_failed_total",
            "TrainingJobs that failed, by reason.",
            [*labels, "reason"],
            registry=self.registry,
        )
        self.restarted = Counter(
            "trainingjob_jobs_restarted_total",
            "Gang or worker restarts, by reason.",
            [*labels, "reason"],
            registry=self.registry,
        )
        self.job_duration = Histogram(
            "trainingjob_job_duration_seconds",
            "Creation to completion of finished jobs.",
            ["framework"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.time_to_running = Histogram(
            "trainingjob_time_to_running_seconds",
            "Creation until all workers first ran.",
            ["framework"],
            buckets=STARTUP_BUCKETS,
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "trainingjob_reconcile_duration_seconds", "Time of one reconcile (plan and apply).", registry=self.registry
        )
        # By controller: what one kind's reconciles cost (the bench's sweep scenario divides it by trials).
        self.reconciles = Counter(
            "trainingjob_reconciles_total",
            "Reconciles run, by controller (kind).",
            ["controller"],
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "trainingjob_reconcile_errors_total", "Reconciles that raised, by kind.", ["kind"], registry=self.registry
        )
        self.progress_dropped = Counter(
            "trainingjob_progress_reports_dropped_total",
            "Progress reports dropped because the API server refused the status they made (422).",
            registry=self.registry,
        )
        self.api_requests = Counter(
            "trainingjob_api_requests_total",
            "Kubernetes API requests the reconciler made, by verb, resource and code.",
            ["verb", "resource", "code"],
            registry=self.registry,
        )

        self.webhook_requests = Counter(
            "trainingjob_webhook_requests_total",
            "Requests the API server made to this replica's webhooks, by webhook and outcome.",
            ["webhook", "outcome"],
            registry=self.registry,
        )
        self.status_patch_fields = Counter(
            "trainingjob_status_patch_fields_total",
            "TrainingJob status patches sent, by top-level status field changed in v1's names (once per field; "
            "'none': an empty patch, the resourceVersion check before deletes).",
            ["field"],
            registry=self.registry,
        )
        self.webhook_connections_closed = Counter(
            "trainingjob_webhook_connections_closed_total",
            "Connections the webhook port closed or refused by its bounds, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.webhook_duration = Histogram(
            "trainingjob_webhook_duration_seconds",
            "Time this replica took to answer a webhook request, body read included.",
            ["webhook"],
            buckets=WEBHOOK_BUCKETS,
            registry=self.registry,
        )
        self.event_loop_lag = Histogram(
            "trainingjob_event_loop_lag_seconds",
            "How much later than asked the event loop woke a sleeper (operator/runtime/loop_lag.py).",
            buckets=LOOP_LAG_BUCKETS,
            registry=self.registry,
        )
        self.converted_objects = Counter(
            "trainingjob_converted_objects_total",
            "TrainingJobs converted for the API server, by the version it had and the one it asked for.",
            ["from_version", "to_version"],
            registry=self.registry,
        )

    def answered(self, webhook: str, outcome: str, seconds: float) -> None:
        """One webhook request answered (webhooks/server.py WebhookObserver)."""
        self.webhook_requests.labels(webhook, outcome).inc()
        self.webhook_duration.labels(webhook).observe(seconds)

    def converted(self, from_version: str, to_version: str, count: int) -> None:
        self.converted_objects.labels(from_version, to_version).inc(count)

    def connection_closed(self, reason: str) -> None:
        """One connection closed by the webhook port's bounds (webhooks/connections.py)."""
        self.webhook_connections_closed.labels(reason).inc()

    def register_cache(self, collector: Collector) -> None:
        self.registry.register(collector)

    def count_status_patch(self, fields: Iterable[str]) -> None:
        """What one status patch changed; the fields come from our own status schema, so the labels are bounded."""
        for name in list(fields) or ["none"]:
            self.status_patch_fields.labels(name).inc()

    def observe_transition(self, body: Mapping[str, Any], old: JobStatus, new: JobStatus) -> None:
        """Count what changed between the stored status and the one just written."""
        metadata, spec = body.get("metadata") or {}, body.get("spec") or {}
        namespace, framework = metadata.get("namespace", ""), spec.get("framework", "")
        created = parse_time(metadata.get("creationTimestamp"))
        if old.phase is None and new.phase is not None:
            self.created.labels(namespace, framework).inc()
        if new.start_time is not None and old.start_time is None and created:
            self.time_to_running.labels(framework).observe(max((new.start_time - created).total_seconds(), 0))
        if new.moved.attempt > old.moved.attempt:
            self.restarted.labels(namespace, framework, _restart_reason(new)).inc()
        if new.phase is old.phase or not new.finished:
            return
        if new.phase is Phase.SUCCEEDED:
            self.succeeded.labels(namespace, framework).inc()
        else:
            failed = new.condition("Failed") or {}
            self.failed.labels(namespace, framework, failed.get("reason") or "Unknown").inc()
        if created and new.completion_time is not None:
            self.job_duration.labels(framework).observe(max((new.completion_time - created).total_seconds(), 0))


def _restart_reason(status: JobStatus) -> str:
    """Why a new attempt began: a restart sets Restarting=True with its reason; a resume leaves the condition
    False (or absent) with the reason of whatever the job is doing now (e.g. WorkersPending), which is not why."""
    restarting = status.condition("Restarting")
    if restarting is not None and restarting.get("status") == "True":
        return restarting.get("reason") or "Unknown"
    return "Resumed"


# Seed 002's per-job training gauges (its utils/metrics.py): name, help, where in status.progress the value is.
TRAINING_GAUGES = (
    ("trainingjob_progress_percent", "Training progress percentage.", ("percent",)),
    ("trainingjob_current_epoch", "Current training epoch.", ("epoch",)),
    ("trainingjob_loss", "Current training loss.", ("metrics", "loss")),
    ("trainingjob_accuracy", "Current training accuracy.", ("metrics", "accuracy")),
)


def _progress_value(progress: Mapping[str, Any], path: tuple[str, ...]) -> float | None:
    """A number from status.progress, or None: what a worker reported is untrusted, so anything but a finite
    number (a string, a bool, a nested object) is left out rather than exported."""
    value: Any = progress
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def training_gauges(jobs: list[Mapping[str, Any]]) -> Iterator[GaugeMetricFamily]:
    """Seed 002's gauges under its names and labels (namespace, trainingjob): one series per job that reported the
    value, derived from the cache at scrape time, so they are bounded by the jobs that exist and go with the job."""
    for name, help_text, path in TRAINING_GAUGES:
        family = GaugeMetricFamily(name, help_text, labels=["namespace", "trainingjob"])
        for job in jobs:
            value = _progress_value((job.get("status") or {}).get("progress") or {}, path)
            if value is not None:
                family.add_metric([job["metadata"]["namespace"], job["metadata"]["name"]], value)
        yield family


class CacheCollector(Collector):
    """Gauges from the informers' indexes: jobs by phase, workers by pod phase, GPUs of running workers, progress."""

    def __init__(
        self,
        jobs: Callable[[], list[Mapping[str, Any]]],
        pod_phases: Callable[[], list[tuple]],
        is_leader: Callable[[], bool],
        queue_depth: Callable[[], int] = lambda: 0,
    ) -> None:
        self.jobs = jobs
        self.pod_phases = pod_phases
        self.is_leader = is_leader
        self.queue_depth = queue_depth

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = self.jobs()
        by_phase = GaugeMetricFamily("trainingjob_jobs", "TrainingJobs by phase.", labels=["phase"])
        for phase, count in sorted(Tally(phase_shown(j, "New") for j in jobs).items()):
            by_phase.add_metric([phase], count)
        yield by_phase
        gpus_per_worker = {
            (j["metadata"]["namespace"], j["metadata"]["name"]): (j.get("spec") or {}).get("gpuPerWorker", 0)
            for j in jobs
        }
        workers = GaugeMetricFamily("trainingjob_workers", "Worker pods by pod phase.", labels=["phase"])
        gpus = GaugeMetricFamily(
            "trainingjob_gpus_requested", "GPUs requested by running workers.", labels=["namespace"]
        )
        worker_phases: Tally = Tally()
        gpu_totals: Tally = Tally()
        for namespace, job, phase in self.pod_phases():
            worker_phases[phase] += 1
            if phase == PodPhase.RUNNING:
                gpu_totals[namespace] += gpus_per_worker.get((namespace, job), 0)
        for phase, count in sorted(worker_phases.items()):
            workers.add_metric([phase], count)
        for namespace, count in sorted(gpu_totals.items()):
            gpus.add_metric([namespace], count)
        yield workers
        yield gpus
        progress = GaugeMetricFamily(
            "trainingjob_job_progress_percent", "Training progress reported by each job.", labels=["namespace", "job"]
        )
        for job in jobs:
            percent = ((job.get("status") or {}).get("progress") or {}).get("percent")
            if percent is not None:
                progress.add_metric([job["metadata"]["namespace"], job["metadata"]["name"]], percent)
        yield progress
        yield from training_gauges(jobs)
        leader = GaugeMetricFamily("trainingjob_operator_leader", "1 if this replica holds the leader Lease.")
        leader.add_metric([], 1 if self.is_leader() else 0)
        yield leader
        # A queue that stays deep means reconciles can't keep up (what controller-runtime's workqueue_depth shows).
        depth = GaugeMetricFamily("trainingjob_workqueue_depth", "Jobs waiting in the work queue for a reconcile.")
        depth.add_metric([], self.queue_depth())
        yield depth
