"""Feeds the pure planner from the informers' indexes and applies its plan; one job at a time per key, on the
TrainingJob controller's own queue and workers (operator/runtime/controller.py), with what it remembers of each job
in one JobMemory (memory.py)."""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api.managed_by import managed_here
from trainingjob.api.runtimes import RuntimeRef, RuntimeSnapshot
from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.kube.status import api_message
from trainingjob.operator.gpu_telemetry import GpuTelemetry
from trainingjob.operator.kueue.decisions import is_queued, queue_decision, workers_left
from trainingjob.operator.kueue.watches import JOB_WORKLOADS
from trainingjob.operator.logs import reconcile_context
from trainingjob.operator.lookups import Lookups
from trainingjob.operator.metrics import OperatorMetrics
from trainingjob.operator.runtime.controller import Controller, Registration
from trainingjob.operator.runtime.informers import stand_in
from trainingjob.operator.runtime.store import Index, Indexes, ObjectKey, views
from trainingjob.operator.trainingjob.apply import Applier, ApplyResult
from trainingjob.operator.trainingjob.backoffs import admission_requeue_delay
from trainingjob.operator.trainingjob.memory import JobMemory
from trainingjob.operator.trainingjob.mlflow import MlflowRuns
from trainingjob.operator.trainingjob.namesakes import Namesakes
from trainingjob.operator.trainingjob.quota_gate import QuotaGate, creates_workers
from trainingjob.operator.trainingjob.watches import (
    DEPARTED_PODS,
    JOB_CLAIMS,
    JOB_CONFIG_MAPS,
    JOB_ENDPOINT_SLICES,
    RUNTIMES,
    TRAININGJOB_BODIES,
    WORKER_PODS,
    WORKER_SERVICES,
    registration,
)
from trainingjob.progress.report import Report
from trainingjob.reconcile.admission import admission_problem, hold
from trainingjob.reconcile.blockers import nodes_in_question
from trainingjob.reconcile.inputs import PlanInputs
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.plan import JobPlan
from trainingjob.reconcile.planner import plan
from trainingjob.reconcile.runtimes import runtime_gives
from trainingjob.reconcile.surroundings import AdmissionDenial, is_pod_security_denial
from trainingjob.scheduling.gang import GangApi, GangView, watched
from trainingjob.scheduling.quota import NamespaceQuotas

logger = logging.getLogger(__name__)
JobKey = tuple[str, str]


class Reconciler:
    """Reconciles TrainingJobs: holds one JobMemory per job only while the job exists."""

    def __init__(
        self,
        indexes: Indexes,
        applier: Applier,
        config: OperatorConfig,
        clock: Callable[[], datetime.datetime] | None = None,
        metrics: OperatorMetrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        lookups: Lookups | None = None,
        gang_apis: frozenset[GangApi] = frozenset(),
        registered: Registration | None = None,
        kueue_served: Callable[[], bool] = lambda: False,
    ) -> None:
        """`lookups` reads namespaces and nodes (None: every namespace counts as not enforcing `restricted` until
        PodSecurity says otherwise, and no node is known). `gang_apis`: the gang APIs the cluster serves, whose
        objects are cached in `indexes` under each provider's index name (scheduling/gang.py). `registered`: the
        controller's registration, as the caches were built from (by default, the one for `gang_apis`)."""
        self.gang_apis = gang_apis
        # Whether the cluster serves Kueue's Workloads now (operator/process.py: the Workload informer says).
        self.kueue_served = kueue_served
        self.quota_gate = QuotaGate(lookups)
        self.metrics = metrics
        self.lookups = lookups
        self.indexes = indexes
        self.applier = applier
        self.config = config
        self.clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self.monotonic = monotonic
        self.memory: dict[Hashable, JobMemory] = {}
        pods = indexes.get(WORKER_PODS)
        if isinstance(pods, Index):  # the informers' index: a creation is met when its pod's event arrives
            pods.on_put = self.pod_sighted
        self.mlflow_runs = MlflowRuns(config.mlflow_tracking_uri)
        # Worker names held by pods that are not the job's workers (unit tests may pass no applier).
        self.namesakes = Namesakes(getattr(getattr(applier, "writer", None), "core", None))
        self.controller = Controller(
            registered or registration(watched(gang_apis)),
            self.reconcile,
            config.max_concurrent_reconciles,
            config.resync_seconds,
            metrics,
        )
        self.queue = self.controller.queue
        # GPU utilisation of worker pods (operator/gpu_telemetry.py; None: telemetry off).
        self.gpu_telemetry: GpuTelemetry | None = None

    def remembered(self, key: Hashable) -> JobMemory:
        """The job's memory, made on first need."""
        memory = self.memory.get(key)
        if memory is None:
            memory = self.memory[key] = JobMemory()
        return memory

    def pod_sighted(self, key: Hashable, pod: ObjectKey) -> None:
        """The pod watch filed `pod` under job `key`: its creation is met, even if the pod is gone again before
        the job is next planned (a plan would then wait for a pod that will not come)."""
        memory = self.memory.get(key)
        if memory is not None:
            memory.expectations.seen(pod[1])

    def job_uid(self, key: JobKey) -> str | None:
        """The job's uid (None: no such job); the progress endpoint checks the reporting pod's controller by it."""
        body = self.job_body(key)
        return None if body is None else str((body.get("metadata") or {}).get("uid") or "")

    def job_pods(self, key: JobKey) -> list[PodView]:
        return views(self.indexes, WORKER_PODS, key)

    def accepts_progress(self) -> bool:
        return self.controller.running

    def report_progress(self, key: JobKey, report: Report) -> None:
        """Keep the newest report; write it now, or when this job's progress interval is over (newest wins)."""
        wait = self.remembered(key).progress.add(report, self.monotonic())
        if wait <= 0:
            self.queue.add(key)
        else:
            self.queue.add_after(key, wait)

    def due_progress(self, key: JobKey, memory: JobMemory) -> Report | None:
        """The pending report if this job's progress interval is over. Any reconcile (our own status write echoing
        back, a pod event) would otherwise write it at once; a withheld one stays pending, due at the requeue."""
        if memory.progress.report is None:
            return None
        wait = memory.progress.wait(self.monotonic())
        if wait > 0:
            self.queue.add_after(key, wait)
            return None
        return memory.progress.report

    def job_body(self, key: JobKey) -> Mapping[str, Any] | None:
        bodies = views(self.indexes, TRAININGJOB_BODIES, key)
        return bodies[0] if bodies else None

    def observed(self, key: JobKey, job_uid: str, progress: Report | None = None) -> ObservedChildren:
        # Only pods this job controls are its workers: labels can be copied by anyone who may create pods, and a
        # copy taken for a worker could have the real one deleted as a stray. Pods of an earlier job of the same
        # name are not ours either; garbage collection removes them.
        pods = [p for p in views(self.indexes, WORKER_PODS, key) if p.controller_uid == job_uid]
        gangs = self.gang_objects(key)
        memory, now = self.remembered(key), self.monotonic()
        expected = memory.expectations
        deleted = expected.pending_deletions(
            {p.uid for p in pods if p.deleting} | {g.uid for g in gangs if g.deleting},
            {p.uid for p in pods} | {g.uid for g in gangs},
            now,
        )
        return ObservedChildren.from_cache(
            pods=pods,
            services=views(self.indexes, WORKER_SERVICES, key),
            config_maps=views(self.indexes, JOB_CONFIG_MAPS, key),
            rejections=memory.rejections,
            departed_pods=[p for p in views(self.indexes, DEPARTED_PODS, key) if p.controller_uid == job_uid],
            claimed_pods=expected.pending_creations({p.name for p in pods}, now),
            released_pods=deleted,
            claims=views(self.indexes, JOB_CLAIMS, key),
            progress=progress,
            gang_apis=self.gang_apis,
            # A gang object we deleted stays in the cache until its watch event: deleting it again is a wasted call.
            gangs=[dataclasses.replace(g, deleting=True) if g.uid in deleted else g for g in gangs],
            endpoint_slices=views(self.indexes, JOB_ENDPOINT_SLICES, key),
        )

    def gang_objects(self, key: JobKey) -> list[GangView]:
        return [view for p in watched(self.gang_apis) for view in views(self.indexes, p.index, key)]

    async def reconcile(self, key: Hashable) -> None:
        with reconcile_context(*key):  # type: ignore[misc]
            await self._reconcile(key)  # type: ignore[arg-type]

    async def _reconcile(self, key: JobKey) -> None:
        body = self.job_body(key)
        if body is None or not managed_here(body):
            self.forget(key)  # another controller's job (spec.managedBy): no children, no status, no Event
            return
        memory = self.remembered(key)
        resource_version = body["metadata"].get("resourceVersion")
        if memory.superseded == resource_version:
            return  # our own write is on its way through the watch; its event will bring us back
        job = TrainingJob.from_body(body)
        now = self.clock()
        if (held := self.held(job, body, now)) is not None:
            self.remember(key, resource_version, await self.applier.apply(job, body, held))
            return
        finished = job.status.finished
        # A finished job carries whatever report is pending (PlanInputs.latest_progress), due or not.
        observed = self.observed(key, job.uid, None if finished else self.due_progress(key, memory))
        observed = self.queued(job, body, observed, now)
        await self.mlflow_runs.prefetch(memory.tracking, job)  # network, so not inside a quota turn
        async with self.quota_gate.turn(job.namespace, creates_workers(job, observed)):
            observed = await self.surroundings(memory, job, observed, now)
            result = plan(job, observed, now, self.config, self.plan_inputs(memory))
            try:
                outcome = await self.applier.apply(job, body, result)
            except ApiException as error:
                if error.status != 422 or result.report is None:
                    raise  # a report refused with the status it made must not fail every reconcile for good
                await self.applier.record_event(job, memory.progress.drop(api_message(error)))
                if self.metrics is not None:
                    self.metrics.progress_dropped.inc()
                self.queue.add(key)
                return
        self.remember(key, resource_version, outcome)
        self.remember_details(memory, result.details_held)
        if (recheck := await self.namesakes.settle(memory.names, job, outcome)) is not None:
            self.queue.add_after(key, recheck)
        self.remember_admission(key, job, observed, outcome, now)
        if self.metrics is not None and outcome.job_changed and not outcome.stale and result.status != job.status:
            self.metrics.observe_transition(body, job.status, result.status)
        if result.actions or result.status != job.status:
            logger.info(
                "reconciled: %d action(s), %d write(s), phase %s",
                len(result.actions),
                outcome.writes,
                result.status.phase,
            )
        if result.report is not None and not outcome.stale:
            memory.progress.written_out(result.report, outcome.job_changed, self.monotonic())
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)

    def queued(
        self, job: TrainingJob, body: Mapping[str, Any], observed: ObservedChildren, now: datetime.datetime
    ) -> ObservedChildren:
        """What Kueue decided for a job labelled for a LocalQueue (or that still has a Workload): the same decision
        the Workload controller (operator/kueue/) acts on for the Workload."""
        if not is_queued(body) and not views(self.indexes, JOB_WORKLOADS, job.key):
            return observed
        left = workers_left(observed.pods, job.uid)
        decision = queue_decision(job, body, self.indexes, self.config, self.kueue_served(), now, left)
        return dataclasses.replace(observed, queue=decision)

    def held(self, job: TrainingJob, body: Mapping[str, Any], now: datetime.datetime) -> JobPlan | None:
        """The hold of a live job whose admission stamp does not vouch for it (reconcile/admission.py): no pods
        for a job nobody checked the author of. None: plan it."""
        key = self.config.admission_key
        if key is None or job.deleting or job.status.finished:
            return None
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        problem = admission_problem(key, job, annotations, self.config.admission_since)
        return None if problem is None else hold(job, problem, now)

    async def surroundings(
        self, memory: JobMemory, job: TrainingJob, observed: ObservedChildren, now: datetime.datetime
    ) -> ObservedChildren:
        """What a job that still runs needs from outside itself: its namespace's PodSecurity level, the state of
        nodes holding its pods stuck Terminating or Running not Ready, admission's latest refusals, and its
        namespace's quotas while it has workers to create."""
        if job.deleting or job.status.finished:
            return observed
        restricted, nodes, quotas = False, {}, NamespaceQuotas()
        if self.lookups is not None:
            restricted = await self.lookups.namespace_restricted(job.namespace)
            nodes = await self.lookups.node_views(nodes_in_question(observed, now, self.config.stuck_after_seconds))
            if creates_workers(job, observed):
                quotas = await self.lookups.resource_quotas(job.namespace)  # is there room for them?
        return dataclasses.replace(
            observed,
            runtime=self.runtime_of(job),
            namespace_restricted=restricted,
            admission=memory.denial,
            nodes=nodes,
            quotas=quotas,
            taken_names=memory.names.taken,
            gpu_utilization=self.gpu_telemetry.of_pods(job.namespace, (p.name for p in observed.pods))
            if self.gpu_telemetry is not None
            else {},
        )

    def runtime_of(self, job: TrainingJob) -> RuntimeSnapshot | None:
        """The runtime the job names, as the cache holds it (None: it names none, or none is cached)."""
        ref = RuntimeRef.from_spec(job.raw_spec)
        index = RUNTIMES.get(ref.kind) if ref is not None else None
        found = views(self.indexes, index, ref.key(job.namespace)) if ref is not None and index else []
        return found[0] if found else None

    def remember_admission(
        self, key: JobKey, job: TrainingJob, observed: ObservedChildren, outcome: ApplyResult, now: datetime.datetime
    ) -> None:
        """Count admission's refusals until a create gets through; and learn from PodSecurity that a namespace
        enforces `restricted` when its label did not say so (pods built without runAsNonRoot are then retried with
        it instead of failing the job)."""
        memory = self.remembered(key)
        if outcome.denials:
            count = (memory.denial.count if memory.denial else 0) + 1
            memory.denial = AdmissionDenial(tuple(outcome.denials), count, now)
            self.queue.add_after(key, admission_requeue_delay(count))
        elif outcome.created:
            memory.denial = None
        # Ours: the pods carry the operator's own securityContext (neither the job nor its runtime sets one).
        given = job.spec.security_context is not None or runtime_gives(job, observed.runtime, "securityContext")
        ours = not given and not observed.namespace_restricted
        if ours and self.lookups is not None and any(is_pod_security_denial(r) for r in outcome.rejections):
            self.lookups.learn_restricted(job.namespace)
            memory.rejections = [r for r in memory.rejections if not is_pod_security_denial(r)]

    def plan_inputs(self, memory: JobMemory) -> PlanInputs:
        """What the planner needs of the job's memory."""
        since = memory.details_since
        return PlanInputs(
            latest_progress=memory.progress.report,
            details_held_for=0.0 if since is None else self.monotonic() - since,
            mlflow_run=memory.tracking.found,
        )

    def remember_details(self, memory: JobMemory, held: bool) -> None:
        """Since when a change of worker details alone has been held back (reconcile/status.py: hold_details)."""
        if not held:
            memory.details_since = None
        elif memory.details_since is None:
            memory.details_since = self.monotonic()

    def remember(self, key: JobKey, resource_version: str | None, outcome: ApplyResult) -> None:
        memory = self.remembered(key)
        # Only a write that made a new resourceVersion brings a watch event to end the wait for it.
        if outcome.job_changed and resource_version:
            memory.superseded = resource_version
        now = self.monotonic()
        memory.expectations.expect_created(outcome.claimed_pods, now)
        memory.expectations.expect_deleted(outcome.released_pods, now)
        for manifest, created in outcome.written:  # read in place of the cached views until the cache shows them
            stand_in(self.indexes, self.controller.registration.owns, key[0], manifest, created)
        if outcome.rejections:
            memory.rejections = outcome.rejections
            self.queue.add(key)

    def forget(self, key: JobKey) -> None:
        """The job is gone: drop everything we kept for it, so memory does not grow with jobs ever seen."""
        self.memory.pop(key, None)
        self.queue.forget(key)
