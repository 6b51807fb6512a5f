"""Feeds the pure planner from the informers' indexes and applies its plan; one job at a time per key."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api.types import TrainingJob, format_time
from trainingjob.config import OperatorConfig
from trainingjob.kube.status import api_message
from trainingjob.operator.apply import Applier, ApplyResult
from trainingjob.operator.backoffs import admission_requeue_delay
from trainingjob.operator.gpu_telemetry import GpuTelemetry
from trainingjob.operator.logs import reconcile_context
from trainingjob.operator.lookups import Lookups
from trainingjob.operator.metrics import OperatorMetrics
from trainingjob.operator.mlflow import MlflowRuns
from trainingjob.operator.namesakes import Namesakes
from trainingjob.operator.pending_progress import PendingProgress
from trainingjob.operator.published import PublishedSlices
from trainingjob.operator.quota_gate import QuotaGate, creates_workers
from trainingjob.operator.runtime.expectations import pending_expectations, sighted
from trainingjob.operator.runtime.queue import WorkQueue
from trainingjob.operator.runtime.store import Index, ObjectKey
from trainingjob.operator.serving import ServingReconciler, is_model_key
from trainingjob.progress.report import Report
from trainingjob.reconcile.actions import Plan
from trainingjob.reconcile.blockers import stuck_pods
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.planner import plan
from trainingjob.reconcile.status import TERMINAL_PHASES, only_details_changed
from trainingjob.reconcile.surroundings import AdmissionDenial, is_pod_security_denial
from trainingjob.scheduling.gang import GangApi, GangView, watched
from trainingjob.scheduling.quota import NamespaceQuotas

logger = logging.getLogger(__name__)
JobKey = tuple[str, str]
# A status change in worker details alone waits this long for the next significant change to carry it.
DETAIL_WRITE_DELAY = 3.0


def _values(index: Mapping[Any, Any], key: JobKey) -> list[Any]:
    store = index.get(key)
    return list(store) if store is not None else []


class Reconciler:
    """Owns the work queue and a bounded pool of workers; holds per-job memory only while the job exists."""

    def __init__(
        self,
        indexes: Mapping[str, Mapping[Any, Any]],
        applier: Applier,
        config: OperatorConfig,
        clock: Callable[[], datetime.datetime] | None = None,
        metrics: OperatorMetrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        lookups: Lookups | None = None,
        gang_apis: frozenset[GangApi] = frozenset(),
        serving: ServingReconciler | None = None,
    ) -> None:
        """`lookups` reads namespaces and nodes (None: every namespace counts as not enforcing `restricted` until
        PodSecurity says otherwise, and no node is known). `gang_apis`: the gang APIs the cluster serves, whose
        objects are cached in `indexes` under each provider's index name (scheduling/gang.py)."""
        self.gang_apis = gang_apis
        # LLMModels share the queue and the workers; their keys are three items (operator/serving.py).
        self.serving = serving
        self.quota_gate = QuotaGate(lookups)
        self.metrics = metrics
        self.lookups = lookups
        self.indexes = indexes
        self.applier = applier
        self.config = config
        self.queue = WorkQueue()
        self.clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self.monotonic = monotonic
        self.rejections: dict[JobKey, list[str]] = {}
        # Creates admission refused in the latest applies, until a create succeeds (see AdmissionDenial).
        self.denials: dict[JobKey, AdmissionDenial] = {}
        # Pods created but not yet seen in the cache, and uids of pods deleted but still shown alive, with when
        # (expectations, as in the ReplicaSet controller; they expire so a missed event cannot pin them).
        self.claimed: dict[JobKey, dict[str, float]] = {}
        self.released: dict[JobKey, dict[str, float]] = {}
        self.published = PublishedSlices(monotonic)
        pods = indexes.get("worker_pods")
        if isinstance(pods, Index):  # the informers' index: a claim is met when its pod's event arrives
            pods.on_put = self.pod_sighted
        # resourceVersion of a job body we wrote over: until the cache shows our write, planning from it is moot.
        self.superseded: dict[JobKey, str] = {}
        # Newest accepted progress report per job not yet in status, and when progress was last written.
        self.progress = PendingProgress(monotonic)
        # Since when a job's status has differed from ours in worker details only (see defer_details).
        self.details_since: dict[JobKey, float] = {}
        self.mlflow_runs = MlflowRuns(config.mlflow_tracking_uri)
        # Worker names held by pods that are not the job's workers (unit tests may pass no applier).
        self.namesakes = Namesakes(getattr(getattr(applier, "writer", None), "core", None))
        self.leading = False
        self.tasks: list[asyncio.Task] = []
        # Since when each worker has been in its current reconcile (monotonic), read by the liveness probe.
        self.in_flight: dict[JobKey, float] = {}
        # Set once every informer has its first listing (see caches_synced).
        self.synced = asyncio.Event()
        # GPU utilisation of worker pods (operator/gpu_telemetry.py; None: telemetry off).
        self.gpu_telemetry: GpuTelemetry | None = None

    def enqueue(self, key: JobKey) -> None:
        self.queue.add(key)

    def pod_sighted(self, key: JobKey, pod: ObjectKey) -> None:
        """The pod watch filed `pod` under job `key`: a claim on its name is met, even if the pod is gone again
        before the job is next planned (a plan would then wait for a pod that will not come)."""
        sighted(self.claimed, key, pod[1])

    def caches_synced(self) -> None:
        """Called once every informer holds its first listing (operator/process.py); workers plan nothing before.

        Until then a job may be in the cache while its pods are not yet: planning from that would take running
        workers for deleted ones and restart the gang (seen at 1000 jobs x 8 workers when a restarted operator
        took over the Lease before its pod index was full).
        """
        self.synced.set()

    def start(self) -> None:
        self.leading = True
        self.tasks = [
            asyncio.create_task(self._worker(), name=f"reconcile-worker-{i}")
            for i in range(self.config.max_concurrent_reconciles)
        ]
        if self.config.resync_seconds:
            self.tasks.append(asyncio.create_task(self._resync(self.config.resync_seconds), name="resync"))

    async def _resync(self, period: float) -> None:
        """Plan every cached job and model again each `period` seconds, whether or not an event came: a missed
        event or a lost timer then delays a decision by one period at most. One with nothing to do costs no API
        call."""
        while True:
            await asyncio.sleep(period)
            self.enqueue_all()

    def job_uid(self, key: JobKey) -> str | None:
        """The job's uid (None: no such job); the progress endpoint checks the reporting pod's controller by it."""
        body = self.job_body(key)
        return None if body is None else str((body.get("metadata") or {}).get("uid") or "")

    def job_pods(self, key: JobKey) -> list[PodView]:
        return _values(self.indexes["worker_pods"], key)

    def accepts_progress(self) -> bool:
        return self.leading

    def report_progress(self, key: JobKey, report: Report) -> None:
        """Keep the newest report; write it now, or when this job's progress interval is over (newest wins)."""
        wait = self.progress.add(key, report)
        if wait <= 0:
            self.queue.add(key)
        else:
            self.queue.add_after(key, wait)

    def due_progress(self, key: JobKey) -> Report | None:
        """The pending report if this job's progress interval is over. Any reconcile (our own status write echoing
        back, a pod event) would otherwise write it at once; a withheld one stays pending, due at the requeue."""
        report = self.progress.get(key)
        if report is None:
            return None
        wait = self.progress.wait(key)
        if wait > 0:
            self.queue.add_after(key, wait)
            return None
        return report

    def start_leading(self) -> None:
        """Leadership acquired: start workers and look at every known job once (events seen as a standby were
        queued too, but a fresh look at all of them is what makes a takeover level-triggered)."""
        self.start()
        self.enqueue_all()

    def enqueue_all(self) -> None:
        """Every cached TrainingJob and LLMModel."""
        for key in list(self.indexes["trainingjob_bodies"]):
            self.enqueue(key)
        for model in self.serving.keys() if self.serving is not None else []:
            self.enqueue(model)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _worker(self) -> None:
        await self.synced.wait()
        while True:
            key = await self.queue.get()
            started = self.in_flight[key] = time.monotonic()
            try:
                await self.reconcile(key)
                self.queue.succeeded(key)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if self.metrics is not None:
                    self.metrics.reconcile_errors.labels(type(error).__name__).inc()
                attempts, delay = self.queue.retry(key)
                logger.exception("reconcile of %s/%s failed (attempt %d); retrying in %.0fs", *key, attempts, delay)
            finally:
                self.in_flight.pop(key, None)
                self.queue.done(key)
                if self.metrics is not None:
                    self.metrics.reconcile_duration.observe(time.monotonic() - started)

    def longest_reconcile(self) -> tuple[JobKey, float] | None:
        """The job whose reconcile has run longest and for how many seconds (None: no reconcile in flight)."""
        if not self.in_flight:
            return None
        key, started = min(self.in_flight.items(), key=lambda item: item[1])
        return key, time.monotonic() - started

    def job_body(self, key: JobKey) -> Mapping[str, Any] | None:
        bodies = _values(self.indexes["trainingjob_bodies"], key)
        return bodies[0] if bodies else None

    def observed(self, key: JobKey, job_uid: str, progress: Report | None = None) -> ObservedChildren:
        # Only pods this job controls are its workers: labels can be copied by anyone who may create pods, and a
        # copy taken for a worker could have the real one deleted as a stray. Pods of an earlier job of the same
        # name are not ours either; garbage collection removes them.
        pods = [p for p in _values(self.indexes["worker_pods"], key) if p.controller_uid == job_uid]
        gangs = self.gang_objects(key)
        released = pending_expectations(
            self.released,
            key,
            {p.uid for p in pods if p.deleting} | {g.uid for g in gangs if g.deleting},
            keep_unseen=False,
            present={p.uid for p in pods} | {g.uid for g in gangs},
        )
        return ObservedChildren.from_cache(
            pods=pods,
            services=_values(self.indexes["worker_services"], key),
            config_maps=_values(self.indexes["job_config_maps"], key),
            rejections=self.rejections.get(key, ()),
            departed_pods=[
                p for p in _values(self.indexes.get("departed_pods") or {}, key) if p.controller_uid == job_uid
            ],
            claimed_pods=pending_expectations(self.claimed, key, {p.name for p in pods}),
            released_pods=released,
            claims=_values(self.indexes["job_claims"], key),
            progress=progress,
            gang_apis=self.gang_apis,
            # A gang object we deleted stays in the cache until its watch event: deleting it again is a wasted call.
            gangs=[dataclasses.replace(g, deleting=True) if g.uid in released else g for g in gangs],
            endpoint_slices=self.published.overlay(key, _values(self.indexes.get("job_endpoint_slices") or {}, key)),
        )

    def gang_objects(self, key: JobKey) -> list[GangView]:
        return [view for p in watched(self.gang_apis) for view in _values(self.indexes.get(p.index) or {}, key)]

    async def reconcile(self, key: JobKey) -> None:
        if is_model_key(key):
            if self.serving is not None:
                await self.serving.reconcile(key)  # type: ignore[arg-type]
            return
        with reconcile_context(*key):
            await self._reconcile(key)

    async def _reconcile(self, key: JobKey) -> None:
        body = self.job_body(key)
        if body is None:
            self.forget(key)
            return
        resource_version = body["metadata"].get("resourceVersion")
        if self.superseded.get(key) == resource_version:
            return  # our own write is on its way through the watch; its event will bring us back
        job = TrainingJob.from_body(body)
        now = self.clock()
        finished = job.status.get("phase") in TERMINAL_PHASES
        observed = self.observed(key, job.uid, self.progress.get(key) if finished else self.due_progress(key))
        await self.mlflow_runs.prefetch(key, job)  # network, so not inside a quota turn
        async with self.quota_gate.turn(job.namespace, creates_workers(job, observed)):
            observed = await self.surroundings(key, job, observed, now)
            planned = plan(job, observed, now, self.config)
            if planned.status.get("phase") in TERMINAL_PHASES and observed.progress is not self.progress.get(key):
                # The job ends now: a report held back by the write interval is its last one (the final
                # progress and checkpoint); it goes into the finishing write instead of being lost.
                observed = dataclasses.replace(observed, progress=self.progress.get(key))
                planned = plan(job, observed, now, self.config)
            result = self.defer_details(key, job, planned)
            result, look_again = await self.mlflow_runs.link(key, job, result, self.clock())
            if look_again is not None:
                self.queue.add_after(key, look_again)
            try:
                outcome = await self.applier.apply(job, body, result)
            except ApiException as error:
                if error.status != 422 or observed.progress is None:
                    raise  # a report refused with the status it made must not fail every reconcile for good
                await self.applier.record_event(job, self.progress.drop(key, api_message(error)))
                if self.metrics is not None:
                    self.metrics.progress_dropped.inc()
                self.queue.add(key)
                return
        self.remember(key, resource_version, outcome)
        if (recheck := await self.namesakes.settle(key, job, outcome)) is not None:
            self.queue.add_after(key, recheck)
        self.remember_admission(key, job, observed, outcome, now)
        if self.metrics is not None and outcome.job_changed and not outcome.stale and result.status != job.status:
            self.metrics.observe_transition(body, job.status, result.status)
        if result.actions or result.status != job.status:
            logger.info(
                "reconciled: %d action(s), %d write(s), phase %s",
                len(result.actions),
                outcome.writes,
                result.status.get("phase"),
            )
        if observed.progress is not None and not outcome.stale:
            self.progress.written_out(key, observed.progress, outcome.job_changed)
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)

    async def surroundings(
        self, key: JobKey, job: TrainingJob, observed: ObservedChildren, now: datetime.datetime
    ) -> ObservedChildren:
        """What a job that still runs needs from outside itself: its namespace's PodSecurity level, the state of
        nodes holding its pods stuck Terminating, admission's latest refusals, and its namespace's quotas while it
        has workers to create."""
        if job.deleting or job.status.get("phase") in TERMINAL_PHASES:
            return observed
        restricted, nodes, quotas = False, {}, NamespaceQuotas()
        if self.lookups is not None:
            restricted = await self.lookups.namespace_restricted(job.namespace)
            stuck = stuck_pods(observed.pods, now, self.config.stuck_after_seconds)
            nodes = await self.lookups.node_views(p.node_name or "" for p in stuck) if stuck else {}
            if creates_workers(job, observed):
                quotas = await self.lookups.resource_quotas(job.namespace)  # is there room for them?
        return dataclasses.replace(
            observed,
            namespace_restricted=restricted,
            admission=self.denials.get(key),
            nodes=nodes,
            quotas=quotas,
            taken_names=self.namesakes.of(key),
            gpu_utilization=self.gpu_telemetry.of_pods(job.namespace, (p.name for p in observed.pods))
            if self.gpu_telemetry is not None
            else {},
        )

    def remember_admission(
        self, key: JobKey, job: TrainingJob, observed: ObservedChildren, outcome: ApplyResult, now: datetime.datetime
    ) -> None:
        """Count admission's refusals until a create gets through; and learn from PodSecurity that a namespace
        enforces `restricted` when its label did not say so (pods built without runAsNonRoot are then retried with
        it instead of failing the job)."""
        if outcome.denials:
            previous = self.denials.get(key)
            count = (previous.count if previous else 0) + 1
            self.denials[key] = AdmissionDenial(tuple(outcome.denials), count, format_time(now))
            self.queue.add_after(key, admission_requeue_delay(count))
        elif outcome.created:
            self.denials.pop(key, None)
        ours = job.spec.security_context is None and not observed.namespace_restricted
        if ours and self.lookups is not None and any(is_pod_security_denial(r) for r in outcome.rejections):
            self.lookups.learn_restricted(job.namespace)
            others = [r for r in self.rejections.pop(key, []) if not is_pod_security_denial(r)]
            if others:
                self.rejections[key] = others

    def defer_details(self, key: JobKey, job: TrainingJob, result: Plan) -> Plan:
        """Hold back a status change that only refreshes worker details for up to DETAIL_WRITE_DELAY.

        While a gang starts or finishes, its pods change one by one and each change would be a status write of its
        own; the phase change that follows within a second or two carries them all in one write instead. A job
        whose details change alone (one worker of many restarted) gets them written once the delay is over.
        """
        if not only_details_changed(job.status, result.status):
            self.details_since.pop(key, None)
            return result
        first_seen = self.details_since.setdefault(key, self.monotonic())
        wait = DETAIL_WRITE_DELAY - (self.monotonic() - first_seen)
        if wait <= 0:
            self.details_since.pop(key, None)
            return result
        self.queue.add_after(key, wait)
        return dataclasses.replace(result, status=dict(job.status))

    def remember(self, key: JobKey, resource_version: str | None, outcome: ApplyResult) -> None:
        # Only a write that made a new resourceVersion brings a watch event to end the wait for it.
        if outcome.job_changed and resource_version:
            self.superseded[key] = resource_version
        now = time.monotonic()
        if outcome.claimed_pods:
            self.claimed.setdefault(key, {}).update(dict.fromkeys(outcome.claimed_pods, now))
        if outcome.released_pods:
            self.released.setdefault(key, {}).update(dict.fromkeys(outcome.released_pods, now))
        self.published.wrote(key, outcome.published_slices)
        if outcome.rejections:
            self.rejections[key] = outcome.rejections
            self.queue.add(key)

    def forget(self, key: JobKey) -> None:
        """The job is gone: drop everything we kept for it, so memory does not grow with jobs ever seen."""
        memories = (
            self.rejections,
            self.denials,
            self.claimed,
            self.released,
            self.superseded,
            self.details_since,
        )
        for memory in memories:
            memory.pop(key, None)
        self.progress.forget(key)
        self.mlflow_runs.forget(key)
        self.namesakes.forget(key)
        self.published.forget(key)
        self.queue.forget(key)
