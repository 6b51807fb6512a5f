"""The Workload controller: keeps the Workload of every queued TrainingJob as the queue planner wants it.

Its keys are the jobs' (namespace, name), on a queue and workers of its own; it writes only Workloads (and Events on
the job when one is refused), never the job: the TrainingJob controller reads the same QueueDecision to write the
job's status and hold or run its workers. Jobs without the queue label and without a Workload cost one cache read.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable, Hashable
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as c
from trainingjob.api.managed_by import managed_by, managed_here
from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.kube.status import api_message
from trainingjob.operator.kueue.decisions import is_queued, job_labels, priority_values, queue_decision, workers_left
from trainingjob.operator.kueue.watches import JOB_WORKLOADS, REGISTRATION, WORKLOADS
from trainingjob.operator.logs import reconcile_context
from trainingjob.operator.runtime.controller import Controller
from trainingjob.operator.runtime.informers import stand_in
from trainingjob.operator.runtime.store import Indexes, views
from trainingjob.operator.runtime.writer import Outcome, Writer
from trainingjob.operator.trainingjob.watches import TRAININGJOB_BODIES, TRAININGJOBS, WORKER_PODS
from trainingjob.planning.actions import Event
from trainingjob.queueing.admission import WorkloadView, merged_conditions
from trainingjob.queueing.planner import QueueDecision
from trainingjob.queueing.workload import PRIORITY_LABEL, QUEUE_LABEL, desired_workload

logger = logging.getLogger(__name__)
# Workload writes are few (one create per job and admission cycle): a small pool, beside the jobs' workers.
WORKLOAD_WORKERS = 4
REFUSED_RETRY_SECONDS = 30.0


def dispatched(body: dict[str, Any]) -> bool:
    """A job MultiKueue runs on a worker cluster (spec.managedBy, on the manager cluster): the TrainingJob controller
    leaves it alone, but its Workload is still ours to make, as Kueue makes the Workloads of the jobs it integrates
    whatever their managedBy: MultiKueue dispatches that Workload and the job with it."""
    return managed_by(body) == c.MULTIKUEUE_CONTROLLER and is_queued(body)


def status_patch(workload: WorkloadView, wanted: dict[str, Any]) -> dict[str, Any]:
    """A merge patch of the Workload's status at the resourceVersion it was planned from, carrying every condition
    (a merge patch replaces the list: Kueue's own conditions are kept, ours put in place)."""
    status: dict[str, Any] = {"conditions": merged_conditions(workload.raw_conditions, wanted["conditions"])}
    if "admission" in wanted:
        status["admission"] = wanted["admission"]
    return {"metadata": {"resourceVersion": workload.resource_version}, "status": status}


class WorkloadReconciler:
    def __init__(
        self,
        indexes: Indexes,
        writer: Writer,
        config: OperatorConfig,
        clock: Callable[[], datetime.datetime] | None = None,
        resync_seconds: float = 0,
        metrics: object = None,
        kueue_served: Callable[[], bool] = lambda: True,
    ) -> None:
        self.indexes = indexes
        # Whether the cluster serves Workloads now: where it does not, the decision is to hold (KueueNotInstalled),
        # not to create a Workload the API server answers 404 for, retried with tracebacks.
        self.kueue_served = kueue_served
        self.writer = writer
        self.config = config
        self.clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self.controller = Controller(REGISTRATION, self.reconcile, WORKLOAD_WORKERS, resync_seconds, metrics)

    async def reconcile(self, key: Hashable) -> None:
        bodies = views(self.indexes, TRAININGJOB_BODIES, key)
        if not bodies or not (managed_here(bodies[0]) or dispatched(bodies[0])):
            return
        if not (is_queued(bodies[0]) or views(self.indexes, JOB_WORKLOADS, key)):
            return
        job = TrainingJob.from_body(bodies[0])
        if job.deleting:
            return  # garbage collection takes the Workload with the job
        with reconcile_context(*key):  # type: ignore[misc]
            pods = views(self.indexes, WORKER_PODS, key)
            left = workers_left(pods, job.uid)
            decision = queue_decision(
                job, bodies[0], self.indexes, self.config, self.kueue_served(), self.clock(), left
            )
            if dispatched(bodies[0]):
                # MultiKueue keeps this Workload's status (admission, Finished) from the worker cluster's copy, and
                # the job's status is that copy's: ours would be written from the worker's view of the job.
                decision = dataclasses.replace(decision, workload_status=None)
            await self.apply(job, bodies[0], decision)

    async def apply(self, job: TrainingJob, body: dict[str, Any], decision: QueueDecision) -> None:
        namespace = job.namespace
        if any(not w.uid for w in views(self.indexes, JOB_WORKLOADS, job.key)):
            return  # one we created, not in the cache yet (a stand-in has no uid to write by): its event comes back
        if decision.delete is not None:
            await self.writer.delete_object(WORKLOADS, namespace, decision.delete.name, decision.delete.uid)
            logger.info("deleted Workload %s (%s)", decision.delete.name, "replaced")
        current = [w for w in views(self.indexes, JOB_WORKLOADS, job.key) if w != decision.delete]
        if decision.create:
            await self.create(job, body)
        if decision.active is not None and current:
            active = {"spec": {"active": decision.active}}
            await self.writer.patch_object(WORKLOADS, namespace, current[0].name, current[0].uid, active)
        if decision.workload_status is not None and current:
            target = current[0]
            patch = status_patch(target, dict(decision.workload_status))
            await self.writer.patch_object(WORKLOADS, namespace, target.name, target.uid, patch, status=True)

    async def refused(self, job: TrainingJob, message: str) -> None:
        """A Warning Event on the job: the job's status says it waits for Kueue, this says why it cannot yet."""
        event = Event("Warning", "WorkloadRefused", message)
        await self.writer.record_event(TRAININGJOBS, (job.namespace, job.name, job.uid), event)

    async def create(self, job: TrainingJob, body: dict[str, Any]) -> None:
        labels = job_labels(body)
        priorities = priority_values(self.indexes)
        manifest = desired_workload(job, labels[QUEUE_LABEL], labels.get(PRIORITY_LABEL), priorities, self.config)
        name = manifest["metadata"]["name"]
        try:
            written = await self.writer.create_object(WORKLOADS, job.namespace, manifest)
        except ApiException as error:  # Kueue's webhook unreachable (Kueue down), or the API server failing
            await self.refused(job, f"cannot create Workload {name} now, retrying: {api_message(error)}")
            raise
        if written.outcome in (Outcome.REJECTED, Outcome.DENIED):
            await self.refused(job, f"Workload {name}: {written.message}")
            self.controller.queue.add_after(job.key, REFUSED_RETRY_SECONDS)
        elif written.outcome is Outcome.DONE:
            stand_in(self.indexes, REGISTRATION.owns, job.namespace, manifest, created=True)
            logger.info("created Workload %s in LocalQueue %s", manifest["metadata"]["name"], labels[QUEUE_LABEL])
